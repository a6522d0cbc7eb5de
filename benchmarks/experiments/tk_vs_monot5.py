"""TK against monoT5 at the papers' sizes, on the same pairs (BENCHMARKS.md, "TK against monoT5 at
the papers' sizes"):

    .venv/bin/python benchmarks/experiments/tk_vs_monot5.py --pairs 256

TK as Hofstätter et al. (2020) size it (300-d word embeddings, 2 layers of 16 x 32 heads,
feed-forward 100; queries cut to 30 words, documents to 200) over the InsuranceQA word list, and
monoT5 on T5-base (223M; query and document cut to 512 tokens together, as the monoT5 paper), both
with random float32 weights (speed does not depend on them), score the same InsuranceQA test pairs
(`t5rank.benchmarking.insuranceqa_candidates`: the first test questions, 16 candidates each) through
`t5rank score`'s pipeline (`score_candidates`: tokenization, shards, one CPU device per core),
twice in one process: the first pass compiles, the second is timed. Prints one table (pairs/s,
the ratio). On a few hundred pairs TK's rate is mostly its fixed cost per shard; a last row times
TK alone on --tk-pairs pairs (the same selection, more questions), as it runs on a real job.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def passes(reranker, params, queries, corpus, candidates) -> tuple[float, float]:
  """(seconds of the first pass, compilation included; seconds of the second) of `score_candidates`
  on the pairs."""
  from t5rank.ranking import scorer

  times = []
  for _ in range(2):
    with tempfile.TemporaryDirectory() as tmp:
      start = time.perf_counter()
      scorer.score_candidates(reranker, params, queries=queries, corpus=corpus,
                              candidates=candidates, output=os.path.join(tmp, "run"),
                              options=scorer.ScoringOptions(window=0), progress=False)
      times.append(time.perf_counter() - start)
  return times[0], times[1]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--pairs", type=int, default=512, help="pairs scored by both models")
  parser.add_argument("--monot5", default="t5_base", help="monoT5's T5 size (t5rank config name)")
  parser.add_argument("--tk-pairs", type=int, default=8192, help="pairs of TK's last row (0: none)")
  parser.add_argument("--words", default="runs/words_insuranceqa_en_300d",
                      help="TK's word list (a `t5rank embeddings` directory; built when missing)")
  args = parser.parse_args()

  from t5rank.ranking.devices import use_cpu_devices

  use_cpu_devices()  # one CPU device per core, as `t5rank score` by default
  import jax

  from t5rank.benchmarking import insuranceqa_candidates, machine
  from t5rank.data.word_embeddings import insuranceqa_embeddings
  from t5rank.models import tk
  from t5rank.models.config import get_config
  from t5rank.models.monot5 import MonoT5
  from t5rank.models.tk_reranker import TK
  from t5rank.models.vocab import load_vocabulary, resolve_target_words
  from t5rank.models.words import WordVocabulary
  from t5rank.testing import random_params

  if args.words == "runs/words_insuranceqa_en_300d" and not os.path.isdir(args.words):
    insuranceqa_embeddings(dim=300)
  queries, corpus, candidates = insuranceqa_candidates(args.pairs)
  pairs = sum(map(len, candidates.values()))
  tk_config = tk.tk_config(args.words)  # the paper's defaults: 300-d, 2 x 16 x 32, 30 / 200 words
  tk_model = TK(tk_config, WordVocabulary.load(args.words))
  tk_params = tk.init_tk_params(tk_config, jax.random.PRNGKey(0))
  t5 = get_config(args.monot5, dropout_rate=0.0)
  vocabulary = load_vocabulary()
  mono = MonoT5(t5, vocabulary, resolve_target_words(vocabulary, "true_false"))
  mono_params = random_params(t5, std=0.05)
  rows = []
  for name, size, reranker, params in (
      (f"TK, paper size ({tk_config.embedding_dim}-d, {tk_config.num_layers} x "
       f"{tk_config.num_heads} x {tk_config.head_dim})",
       sum(x.size for x in jax.tree.leaves(tk_params)), tk_model, tk_params),
      (f"monoT5, {args.monot5}", t5.num_parameters, mono, mono_params)):
    first, second = passes(reranker, params, queries, corpus, candidates)
    rows.append((name, size, first, second, pairs))
    print(f"{name}: first pass {first:.1f} s, second {second:.1f} s ({pairs / second:.1f} "
          "pairs/s)", flush=True)
  if args.tk_pairs:
    more = insuranceqa_candidates(args.tk_pairs)
    first, second = passes(tk_model, tk_params, *more)
    count = sum(map(len, more[2].values()))
    rows.append((f"{rows[0][0]}, {count:,} pairs", rows[0][1], first, second, count))
  mono_rate = pairs / rows[1][3]
  print(f"\n{pairs} InsuranceQA test pairs ({len(queries)} questions x 16 candidates); "
        f"{machine()}\n")
  print("| reranker | parameters | first pass (compiling) | second pass | pairs/s "
        "| against monoT5 |")
  print("| --- | --- | --- | --- | --- | --- |")
  for name, size, first, second, count in rows:
    rate = count / second
    print(f"| {name} | {size / 1e6:.1f}M | {first:.1f} s | {second:.1f} s | {rate:,.1f} | "
          f"{rate / mono_rate:.1f}x |")


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  main()
