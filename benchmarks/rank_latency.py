"""Latency of the Python front door: `t5rank.load(...).rank(query, 100 passages)` against Hugging
Face PyTorch scoring the same 100 pairs in one batch, same weights, same CPU, same run.

    .venv/bin/python benchmarks/rank_latency.py --reference-python /path/to/python-with-torch
    # the reference Python needs torch and transformers 4.57.1 (the [reference] extra), e.g. a
    # venv made with: pip install torch==2.13.0 transformers==4.57.1 sentencepiece safetensors

The model: T5-small shapes (t5rank's `t5_small` config) with random T5-like weights from a fixed
seed, written once as a Hugging Face directory (config.json, model.safetensors, spiece.model) that
both sides load. The pairs: the first InsuranceQA v2 test question and the first 100 answers of its
pool (real text, whole answers: `window=0`).
- t5rank: `rank()` called once (the first call: tokenization, placement already done by `load`,
  compilation of each batch shape), then 50 times (the steady state); median and 95th percentile.
- the reference: `T5ForConditionalGeneration` in float32 under `torch.inference_mode()`, the 100
  pairs tokenized by transformers' `T5Tokenizer` on the same SentencePiece model ("Query: q
  Document: d Relevant:", padding to the longest, truncation at 512), one forward pass with decoder
  start id 0, log-softmax over the (false, true) logits; the same 1 + 50 calls, timed with and
  without the tokenizer. Both sides run with the same number of threads (`--threads`).
It checks that log P(true) agrees to 1e-4 on the inputs both sides tokenize alike (an input longer
than 512 tokens is cut differently: transformers drops its end, `Relevant:` with it; t5rank cuts the
document and keeps the suffix) and prints one Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REFERENCE = r'''
import json, sys, time
import torch, transformers
args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
model = transformers.T5ForConditionalGeneration.from_pretrained(args["model"]).eval()
tokenizer = transformers.T5Tokenizer(vocab_file=args["model"] + "/spiece.model", legacy=True)
texts = [f"Query: {args['query']} Document: {d} Relevant:" for d in args["documents"]]
true_id, false_id = 1176, 6136

def score(ids=None):
  if ids is None:
    ids = tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="pt")
  with torch.inference_mode():
    start = torch.zeros((ids["input_ids"].shape[0], 1), dtype=torch.long)
    logits = model(**ids, decoder_input_ids=start).logits[:, 0, [false_id, true_id]]
    return torch.log_softmax(logits, dim=-1)[:, 1].tolist()

ids = tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="pt")
out = {"first_s": None, "with_tokenizer_s": [], "forward_s": []}
t = time.perf_counter(); log_p = score(); out["first_s"] = time.perf_counter() - t
for _ in range(args["calls"]):
  t = time.perf_counter(); score(); out["with_tokenizer_s"].append(time.perf_counter() - t)
for _ in range(args["calls"]):
  t = time.perf_counter(); score(ids); out["forward_s"].append(time.perf_counter() - t)
out["log_p"] = log_p
out["ids"] = tokenizer(texts, truncation=True, max_length=512)["input_ids"]
out["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
print(json.dumps(out))
'''


def percentile(values: list[float], q: float) -> float:
  """The q-th percentile (0-100) of `values`, linear between order statistics."""
  ordered = sorted(values)
  k = (len(ordered) - 1) * q / 100
  low = int(k)
  high = min(low + 1, len(ordered) - 1)
  return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def insuranceqa_pairs(passages: int) -> tuple[str, list[str]]:
  """The first test question and the first `passages` answers of its pool."""
  from t5rank.data.insuranceqa import load_split

  data = load_split("test", "en", 1)
  qid = next(iter(data.queries))
  pool = [*data.relevant[qid], *data.negatives[qid]][:passages]
  return data.queries[qid], [data.answers[a] for a in pool]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--reference-python", default=sys.executable,
                      help="a Python with torch and transformers (default: this one)")
  parser.add_argument("--passages", type=int, default=100)
  parser.add_argument("--calls", type=int, default=50)
  parser.add_argument("--threads", type=int, default=os.cpu_count())
  parser.add_argument("--config", default="t5_small")
  args = parser.parse_args(argv)

  import numpy as np

  import t5rank
  from t5rank.models.config import get_config
  from t5rank.models.t5_weights.hf import save_hf_checkpoint
  from t5rank.models.vocab import load_vocabulary
  from t5rank.testing import random_params

  query, documents = insuranceqa_pairs(args.passages)
  with tempfile.TemporaryDirectory() as model_dir:
    config = get_config(args.config)
    save_hf_checkpoint(model_dir, random_params(config, seed=0), config)
    shutil.copyfile(load_vocabulary().path, os.path.join(model_dir, "spiece.model"))

    start = time.perf_counter()
    ranker = t5rank.load(model_dir)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    first = ranker.rank(query, documents)
    first_s = time.perf_counter() - start
    steady = []
    for _ in range(args.calls):
      start = time.perf_counter()
      ranker.rank(query, documents)
      steady.append(time.perf_counter() - start)
    ours = {r["corpus_id"]: r["score"] for r in first}

    done = subprocess.run([args.reference_python, "-c", REFERENCE, json.dumps(
        {"model": model_dir, "query": query, "documents": documents, "calls": args.calls,
         "threads": args.threads})], capture_output=True, text=True, check=False,
        env=dict(os.environ, USE_TF="0", TRANSFORMERS_VERBOSITY="error"))
    if done.returncode != 0:
      print(done.stderr[-2000:], file=sys.stderr)
      return 1
    reference = json.loads(done.stdout.strip().splitlines()[-1])
  # An input longer than 512 tokens is cut differently: transformers' tokenizer drops its end
  # (`Relevant:` too), t5rank cuts the document and keeps the suffix; the others must agree.
  from t5rank.models.monot5 import MonoT5
  from t5rank.models.vocab import resolve_target_words

  vocab = load_vocabulary()
  encoded = MonoT5(config, vocab, resolve_target_words(vocab, "true_false")).encode(
      [query] * len(documents), documents)
  same = [i for i, (ids, example) in enumerate(zip(reference["ids"], encoded))
          if list(ids) == [int(x) for x in (example[0] if isinstance(example, tuple) else example)]]
  difference = float(np.max(np.abs(np.array([ours[i] for i in same])
                                    - np.array([reference["log_p"][i] for i in same]))))
  cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
              if line.startswith("model name")), platform.processor())
  print(f"{args.config}, random weights; 1 query x {len(documents)} InsuranceQA answers; "
        f"{args.threads} threads; {cpu}; {time.strftime('%Y-%m-%d')}; "
        f"torch {reference['versions']['torch']}, transformers "
        f"{reference['versions']['transformers']}; max |d log P(true)| {difference:.1e} over "
        f"the {len(same)} inputs both tokenize alike (the others are longer than 512 tokens)")
  print("| | first call | median | p95 |")
  print("| --- | --- | --- | --- |")
  rows = [(f"t5rank `rank()` (load {load_s:.1f} s)", first_s, steady),
          ("HF PyTorch, tokenizer + forward", reference["first_s"], reference["with_tokenizer_s"]),
          ("HF PyTorch, forward only", None, reference["forward_s"])]
  for name, first_call, calls in rows:
    first_cell = f"{first_call * 1000:.0f} ms" if first_call is not None else ""
    print(f"| {name} | {first_cell} | {statistics.median(calls) * 1000:.0f} ms | "
          f"{percentile(calls, 95) * 1000:.0f} ms |")
  return 0 if difference <= 1e-4 else 1


if __name__ == "__main__":
  sys.exit(main())
