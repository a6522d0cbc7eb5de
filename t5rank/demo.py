"""`t5rank demo`: the main job on a small built-in example.

Until the end-to-end InsuranceQA job lands, this scores a few built-in (query, document) pairs with
a tiny T5 built from a fixed seed (random weights: the ranking is not meaningful yet) and prints
the scores, to show every stage of the scoring path runs on this machine.
"""

from __future__ import annotations

import argparse
import time

EXAMPLE_QUERY = "can i cancel my life insurance policy at any time?"
EXAMPLE_DOCUMENTS = [
    "Yes, you can cancel a life insurance policy at any time by contacting the insurer in writing.",
    "Homeowners insurance covers damage to your house caused by fire, wind and theft.",
    "A term life policy that is cancelled simply lapses; a whole life policy may pay a cash value.",
    "Car insurance rates depend on your driving record, age and the car you drive.",
]


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("demo", help="run the main job on a small built-in example",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--model", default="tiny", help="model config name (default: tiny)")
  p.add_argument("--seed", type=int, default=0)
  p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
  import jax
  import numpy as np

  from t5rank.config import get_config
  from t5rank.inputs import encode_pairs
  from t5rank.network import init_params
  from t5rank.score import score_step
  from t5rank.vocab import load_vocabulary, resolve_target_words

  vocab = load_vocabulary()
  config = get_config(args.model)
  target_ids = resolve_target_words(vocab, "true_false")
  params = init_params(config, jax.random.PRNGKey(args.seed))
  ids = encode_pairs(vocab, [EXAMPLE_QUERY] * len(EXAMPLE_DOCUMENTS), EXAMPLE_DOCUMENTS)
  batch = np.zeros((len(ids), max(map(len, ids))), np.int32)
  for row, seq in enumerate(ids):
    batch[row, :len(seq)] = seq
  start = time.perf_counter()
  log_p, p = score_step(params, batch, config=config, target_ids=target_ids)
  p = np.asarray(p)
  elapsed = time.perf_counter() - start
  print(f"model {args.model} ({config.num_parameters / 1e6:.1f}M parameters, random weights, "
        f"seed {args.seed}); targets true/false = ids {target_ids}")
  print(f"query: {EXAMPLE_QUERY}")
  for rank, i in enumerate(np.argsort(-p, kind="stable"), start=1):
    print(f"{rank}. P(true)={p[i]:.6f} log={float(log_p[i]):.6f}  {EXAMPLE_DOCUMENTS[i][:70]}")
  print(f"scored {len(ids)} pairs in {elapsed:.2f}s (including compilation)")
  return 0
