"""`t5rank score` against the PyTorch reference: same weights, same pairs, same cores, float32.

    .venv/bin/pip install -e '.[reference]'   # torch (CPU) + transformers, only for this script
    .venv/bin/python benchmarks/reference_speed.py --pairs tiny=1000,10000 --pairs t5_small=1000 \
        --threads 2 --write

On a CPU both sides score t5_small far slower than tiny, so 100,000 pairs of the three kinds take
hours for tiny and days for t5_small (the rates: BENCHMARKS.md, "Speed against the PyTorch
reference"); ask for them per model (`--pairs tiny=1000,10000,100000`).

The reference is what users run today: Hugging Face transformers' `T5ForConditionalGeneration` with
pygaggle's MonoT5 recipe (castorini/pygaggle, `rerank/transformer.py`): each query's candidates in
their given order, batches of 8 padded to the longest, one forward pass with the start id 0 as the
decoder input under `torch.inference_mode()`, the full-vocabulary logits of that step, the logits of
(false, true), log-softmax, log P(true).

For each model config (random float32 weights from a fixed seed, written by t5rank's own Hugging
Face export and loaded from that directory by both sides, as `t5rank score --checkpoint DIR` would),
each kind of input and each number of pairs, the script
- builds the InsuranceQA v2 test pairs (each question with its pool of ~200 candidate answers, the
  questions in id order, until there are enough pairs) and turns them into ids once, with
  `t5rank.ranking.candidates.candidate_passages` and `MonoT5.encode`; both scorers get exactly these ids;
- scores them with t5rank's device loop as `t5rank score` runs it (shards of 10,000 pairs,
  `bucket_batches`, `score_batches`), after compiling every shape once (compilation is timed apart);
- scores them with the reference (after one untimed warm-up batch);
- fails (exit status 1) when the two log P(true) differ by more than 1e-4 for any pair;
- times both tokenizers on the same texts: t5rank's `MonoT5.encode` and pygaggle's batch tokenizer
  (the slow `T5Tokenizer` on t5rank's SentencePiece model, `{text} </s>`, padding to the longest,
  truncation at 512, plus the `tokenize` call pygaggle makes for every batch), and counts the pairs
  for which pygaggle's ids equal t5rank's.

Kinds of input (`--lengths`):
  short     the answers as they are (one passage per candidate, `--window 0`);
  windows   documents of 4 consecutive answers of the query's pool (the candidate and the next
            three; ~760 tokens, the size of a Robust04 document) split by `t5rank.ranking.passages` into
            windows of 10 sentences every 5 (`t5rank score`'s MaxP defaults); a pair is one window;
  long512   the same 4-answer documents whole (`--window 0`), so nearly every input is cut to 512.

Threads: `--threads N` pins this process to N of its cores before JAX or torch start, so XLA's
thread pool and torch's (`torch.set_num_threads(N)`) run on the same N cores. t5rank then splits its
batches over one CPU device per core, as `t5rank score` does by default (`--cpu-devices`, see
`t5rank.ranking.devices.use_cpu_devices`; `--cpu-devices 1` measures a single device using all N cores).

FLOPs per pair (a multiply-add counts 2), for an input of L real tokens, d = d_model,
h = num_heads x d_kv, f = d_ff, m = 2 matrices in the feed-forward (3 when gated):
  encoder layer:  2 L (4 d h + m d f)  +  4 L^2 h                    (projections + attention)
  decoder layer:  2 (4 d h + m d f)  +  2 (2 d h)  +  2 L (2 d h)  +  4 L h
                  (one step: self-attention and feed-forward, cross-attention query and output,
                   cross-attention keys and values of the L encoder states, cross-attention)
  output:         2 d x 2 (two logits; the reference computes all V: 2 d V, not counted)
which is 2 x (non-embedding parameters of the encoder) x L plus the attention and the decoder's
share. Padding is not counted: the rates are useful FLOP/s. The peak is the best of 5 float32
`jnp.dot`s of 2048 x 2048 matrices (and `torch.matmul` for comparison) on the same cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import sys
import tempfile
import time
from typing import Optional, Sequence

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("USE_TF", "0")  # transformers would otherwise import TensorFlow too

from t5rank.benchmarking import (KINDS, insuranceqa_pairs, machine, padding_fraction,  # noqa: E402
                                 score_timed, scoring_batches, write_section)
from t5rank.models.loading import load_reranker  # noqa: E402
from t5rank.models.monot5 import MonoT5  # noqa: E402
from t5rank.models.vocab import UNK_ID  # noqa: E402
from t5rank.models.reranker import Batch  # noqa: E402
from t5rank.ranking.devices import use_cpu_devices  # noqa: E402
from t5rank.ranking.candidates import Pair  # noqa: E402
from t5rank.models.config import T5Config, get_config  # noqa: E402
from t5rank.models.inputs import DEFAULT_MAX_LENGTH, format_input  # noqa: E402
from t5rank.testing import random_params  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where BENCHMARKS.md is
SECTION = "## Speed against the PyTorch reference"
TOLERANCE = 1e-4  # largest allowed |log P(true) difference| between t5rank and the reference
REFERENCE_BATCH = 8  # pygaggle's MonoT5 default
TOKENIZE_PAIRS = 10_000  # the tokenizers are timed on at most this many pairs
PEAK_SIZE = 2048


def transformers_version() -> str:
  import transformers

  return transformers.__version__


class AgreementError(AssertionError):
  """t5rank and the reference disagree by more than TOLERANCE."""


# ---------------------------------------------------------------------------------------------------
# Weights and the two scorers.



@dataclasses.dataclass
class Scorers:
  """Both scorers loaded from one Hugging Face directory: t5rank's (the `MonoT5` reranker, its
  params placed on the scoring mesh, the mesh) and the reference's torch model."""
  reranker: MonoT5
  params: dict
  mesh: object
  torch_model: "transformers.T5ForConditionalGeneration"
  load_s: dict[str, float]


def load_scorers(directory: str) -> Scorers:
  """Loads the Hugging Face checkpoint in `directory` with t5rank (as `t5rank score` does) and with
  transformers (float32, eval mode), timing each load."""
  import torch
  import transformers

  start = time.perf_counter()
  from t5rank.ranking.devices import place_params, scoring_mesh

  reranker, params = load_reranker(directory)
  mesh = scoring_mesh()
  params = place_params(params, reranker.param_axes(), mesh)
  t5rank_s = time.perf_counter() - start
  start = time.perf_counter()
  model = transformers.T5ForConditionalGeneration.from_pretrained(
      directory, dtype=torch.float32).eval()
  reference_s = time.perf_counter() - start
  return Scorers(reranker, params, mesh, model,
                 {"t5rank": t5rank_s, "reference": reference_s})


def build_scorers(config: T5Config, directory: str, seed: int = 0) -> Scorers:
  """Random weights of `config` (`random_params`), exported by t5rank to the Hugging Face format in
  `directory`, then loaded by both scorers."""
  from t5rank.models.t5_weights.hf import save_hf_checkpoint

  save_hf_checkpoint(directory, random_params(config, seed), config)
  return load_scorers(directory)


# ---------------------------------------------------------------------------------------------------
# The reference's scoring loop (t5rank's: `t5rank.benchmarking.scoring_batches`, `score_timed`).

def reference_batches(pairs: Sequence[Pair], ids: Sequence[Sequence[int]],
                      batch_size: int = REFERENCE_BATCH) -> list[Batch]:
  """pygaggle's batches: each query's pairs in their given order, `batch_size` at a time, padded
  with 0 to the longest of the batch; items index into `ids`."""
  by_query: dict[str, list[int]] = {}
  for i, pair in enumerate(pairs):
    by_query.setdefault(pair.qid, []).append(i)
  batches = []
  for items in by_query.values():
    for first in range(0, len(items), batch_size):
      chunk = np.asarray(items[first:first + batch_size])
      tokens = np.zeros((len(chunk), max(len(ids[i]) for i in chunk)), np.int64)  # (B, L)
      for row, i in enumerate(chunk):
        tokens[row, :len(ids[i])] = ids[i]
      batches.append(Batch(chunk, (tokens,)))
  return batches


def reference_log_p(model, tokens: np.ndarray, target_ids: tuple[int, int]) -> np.ndarray:
  """pygaggle's MonoT5 score of one padded batch (B, L): log P(true), (B,) float32."""
  import torch

  positive, negative = target_ids
  with torch.inference_mode():
    input_ids = torch.from_numpy(tokens)
    start = torch.zeros((tokens.shape[0], 1), dtype=torch.long)  # decoder_start_token_id 0
    logits = model(input_ids=input_ids, attention_mask=(input_ids != 0).long(),
                   decoder_input_ids=start).logits[:, -1, :]  # (B, V)
    two = torch.nn.functional.log_softmax(logits[:, [negative, positive]], dim=1)  # (B, 2)
    return two[:, 1].numpy().astype(np.float32)


def score_reference(scorers: Scorers, batches: Sequence[Batch], num_items: int,
                    progress: bool = False) -> tuple[np.ndarray, float, float]:
  """(log P(true) per item, warm-up seconds, scoring seconds) of the reference over `batches`; the
  first batch is run once untimed first."""
  from tqdm import tqdm

  start = time.perf_counter()
  target_ids = scorers.reranker.target_ids
  reference_log_p(scorers.torch_model, batches[0].arrays[0], target_ids)
  warm_s = time.perf_counter() - start
  log_p = np.full(num_items, np.nan, np.float32)
  with tqdm(total=num_items, unit="pair", desc="reference", disable=not progress) as bar:
    start = time.perf_counter()
    for batch in batches:
      log_p[batch.items] = reference_log_p(scorers.torch_model, batch.arrays[0], target_ids)
      bar.update(len(batch.items))
    score_s = time.perf_counter() - start
  return log_p, warm_s, score_s


def pygaggle_tokenize(tokenizer, queries: dict[str, str], pairs: Sequence[Pair],
                      passages: dict[str, list[str]], batch_size: int = REFERENCE_BATCH
                      ) -> list[list[int]]:
  """Ids of `pairs` as pygaggle's T5BatchTokenizer makes them (per query, `batch_size` at a time,
  padded to the longest, cut at 512), without the padding."""
  by_query: dict[str, list[Pair]] = {}
  for pair in pairs:
    by_query.setdefault(pair.qid, []).append(pair)
  out = []
  for qid, query_pairs in by_query.items():
    for first in range(0, len(query_pairs), batch_size):
      texts = [format_input(queries[qid], passages[p.docid][p.part]) + f" {tokenizer.eos_token}"
               for p in query_pairs[first:first + batch_size]]
      encoded = tokenizer.batch_encode_plus(texts, return_attention_mask=True, padding="longest",
                                            truncation=True, max_length=DEFAULT_MAX_LENGTH,
                                            return_tensors="pt")
      list(map(tokenizer.tokenize, texts))  # pygaggle keeps these too
      for row, mask in zip(encoded["input_ids"].tolist(), encoded["attention_mask"].tolist()):
        out.append(row[:sum(mask)])
  return out


# ---------------------------------------------------------------------------------------------------
# Effort per pair and the peak.

def flops_per_pair(config: T5Config, length: int) -> float:
  """FLOPs of one monoT5 score of an input of `length` tokens (the module docstring's formula)."""
  d, h, f, n = config.d_model, config.num_heads * config.d_kv, config.d_ff, length
  m = 3 if config.feed_forward == "gated-gelu" else 2
  encoder = 2 * n * (4 * d * h + m * d * f) + 4 * n * n * h
  decoder = 2 * (4 * d * h + m * d * f) + 2 * (2 * d * h) + 2 * n * (2 * d * h) + 4 * n * h
  return (config.num_encoder_layers * encoder + config.num_decoder_layers * decoder
          + 2 * d * 2)


def matmul_peak(size: int = PEAK_SIZE, repeats: int = 5) -> dict[str, float]:
  """Best FLOP/s of `repeats` float32 (size x size) @ (size x size) products, jnp.dot (jitted) and
  torch.matmul, on this process's cores."""
  import jax
  import jax.numpy as jnp
  import torch

  rng = np.random.default_rng(0)
  a, b = (rng.standard_normal((size, size), np.float32) for _ in range(2))
  flops = 2 * size ** 3
  dot = jax.jit(jnp.dot)
  ja, jb = jax.device_put(a), jax.device_put(b)
  dot(ja, jb).block_until_ready()
  ta, tb = torch.from_numpy(a), torch.from_numpy(b)
  torch.matmul(ta, tb)
  best = {"jax": 0.0, "torch": 0.0}
  for _ in range(repeats):
    start = time.perf_counter()
    dot(ja, jb).block_until_ready()
    best["jax"] = max(best["jax"], flops / (time.perf_counter() - start))
    start = time.perf_counter()
    torch.matmul(ta, tb)
    best["torch"] = max(best["torch"], flops / (time.perf_counter() - start))
  return best


# ---------------------------------------------------------------------------------------------------
# One comparison.

def compare(scorers: Scorers, kind: str, num_pairs: int, *, tokenizer=None,
            reference_batch: int = REFERENCE_BATCH, progress: bool = False) -> dict:
  """Figures of both scorers on the first `num_pairs` pairs of `kind`; raises AgreementError when
  their log P(true) differ by more than TOLERANCE. With a pygaggle `tokenizer`, the two tokenizers
  are timed too (on at most TOKENIZE_PAIRS pairs)."""
  queries, pairs, passages, options = insuranceqa_pairs(kind, num_pairs)
  reranker = scorers.reranker
  encode = lambda chosen: reranker.encode([queries[p.qid] for p in chosen],
                                          [passages[p.docid][p.part] for p in chosen])
  ids = [np.asarray(x, np.int32) for x in encode(pairs)]  # 100k x 512 Python ints: gigabytes
  ours = scoring_batches(reranker, scorers.mesh, ids, options)
  theirs = reference_batches(pairs, ids, reference_batch)
  log_p, compile_s, t5rank_s = score_timed(reranker, scorers.params, scorers.mesh, ours, len(ids),
                                           progress)
  reference, warm_s, reference_s = score_reference(scorers, theirs, len(ids), progress)
  difference = np.abs(log_p.astype(np.float64) - reference)
  worst = int(np.argmax(difference))
  if not np.all(np.isfinite(difference)) or difference[worst] > TOLERANCE:
    raise AgreementError(
        f"{kind}, {num_pairs} pairs: t5rank and the reference differ by {difference[worst]:.3g} in "
        f"log P(true) (tolerance {TOLERANCE}) at pair {pairs[worst]} ({len(ids[worst])} tokens): "
        f"{log_p[worst]!r} vs {reference[worst]!r}")
  lengths = np.fromiter(map(len, ids), np.int64, len(ids))
  flops = sum(flops_per_pair(reranker.config, int(n)) for n in lengths)
  row = {
      "kind": kind, "pairs": len(ids), "tokens": float(lengths.mean()),
      "cut": float((lengths == reranker.max_length).mean()),
      "t5rank": len(ids) / t5rank_s, "reference": len(ids) / reference_s,
      "compile_s": compile_s, "shapes": len({b.arrays[0].shape for b in ours}),
      "warm_s": warm_s, "padding_t5rank": padding_fraction(ours),
      "padding_reference": padding_fraction(theirs),
      "max_diff": float(difference[worst]), "score_std": float(np.std(reference)),
      "flops": flops / len(ids), "flops_t5rank": flops / t5rank_s,
      "flops_reference": flops / reference_s,
  }
  if tokenizer is not None:
    k = min(len(pairs), TOKENIZE_PAIRS)
    start = time.perf_counter()
    encode(pairs[:k])
    row["tokenize_t5rank"] = k / (time.perf_counter() - start)
    start = time.perf_counter()
    pygaggle_ids = pygaggle_tokenize(tokenizer, queries, pairs[:k], passages, reference_batch)
    row["tokenize_reference"] = k / (time.perf_counter() - start)
    unknown = sum(int(np.sum(np.asarray(x) == UNK_ID)) for x in pygaggle_ids)
    if unknown > sum(int(np.sum(np.asarray(x) == UNK_ID)) for x in ids[:k]):
      raise AgreementError(
          f"pygaggle's tokenizer (transformers {transformers_version()} T5Tokenizer) gave "
          f"{unknown} unknown ids (2) where SentencePiece gives pieces: transformers 5.x's "
          "T5Tokenizer(vocab_file=...) maps every piece of a bare SentencePiece file to the unknown "
          "id; install the pinned 4.x (pip install -e '.[reference]')")
    row["same_ids"] = sum(map(np.array_equal, pygaggle_ids, ids[:k])) / k
    row["tokenized"] = k
  return row


# ---------------------------------------------------------------------------------------------------
# Command line and report.

def use_cores(count: Optional[int]) -> list[int]:
  """Pins this process (and the threads it starts later) to `count` of its allowed cores, all when
  None; returns the cores. Call before JAX or torch start their thread pools."""
  allowed = sorted(os.sched_getaffinity(0))
  if count is None:
    return allowed
  if not 1 <= count <= len(allowed):
    raise SystemExit(f"--threads {count}: this process may use {len(allowed)} cores {allowed}")
  os.sched_setaffinity(0, allowed[:count])
  return allowed[:count]


def parse_pairs(entries: Sequence[str], models: Sequence[str]) -> dict[str, list[int]]:
  """`--pairs` entries, `N,N,...` for every model or `model=N,N,...` for one, as {model: counts}."""
  counts, default = {}, None
  for entry in entries:
    name, _, numbers = entry.rpartition("=")
    values = [int(n) for n in numbers.split(",") if n]
    if not values or min(values) < 1:
      raise SystemExit(f"--pairs {entry!r}: expected positive counts such as 1000,10000")
    if name and name not in models:
      raise SystemExit(f"--pairs {entry!r}: {name} is not in --models {','.join(models)}")
    if name:
      counts[name] = values
    else:
      default = values
  missing = [m for m in models if m not in counts and default is None]
  if missing:
    raise SystemExit(f"--pairs gives no counts for {', '.join(missing)}")
  return {m: counts.get(m, default) for m in models}


def report(rows: list[dict], *, command: str, cores: list[int], peak: dict, loads: tuple,
           elapsed: float) -> str:
  """The BENCHMARKS.md section for `rows`."""
  import jax
  import torch
  import transformers

  lines = [
      SECTION, "",
      f"- Date: {datetime.date.today().isoformat()}",
      f"- Machine: {machine()}; torch {torch.__version__}, transformers {transformers.__version__}",
      f"- Threads: {len(cores)} (cores {cores}; XLA pinned to them, torch.set_num_threads"
      f"({len(cores)})); t5rank's batches split over {jax.local_device_count()} CPU device(s)",
      f"- Load average (1 min): {loads[0]:.1f} at the start, {loads[1]:.1f} at the end",
      f"- Matmul peak ({PEAK_SIZE}^2 float32, best of 5): jnp.dot {peak['jax'] / 1e9:.1f} GFLOP/s, "
      f"torch.matmul {peak['torch'] / 1e9:.1f} GFLOP/s",
      f"- Whole script: {elapsed:.0f} s", "",
      "```", command, "```", "",
      "Random float32 weights (fixed seed) exported by t5rank to the Hugging Face format; both "
      "scorers get the same ids.",
      "pairs/s exclude compilation (t5rank, every shape once) and one warm-up batch (reference).",
      "GFLOP/pair counts real tokens only (formula in benchmarks/reference_speed.py); % peak is "
      "useful FLOP/s over the jnp.dot peak.",
      "score std: the spread of log P(true) over the pairs (the agreement is not vacuous); "
      "compile: shapes that an earlier row of the same model compiled are cached.", "",
      "| model | inputs | pairs | tokens/pair (cut at 512) | t5rank pairs/s | reference pairs/s | "
      "speedup | t5rank compile (shapes) | padding t5rank / ref | max abs diff log P "
      "(score std) | GFLOP/pair | % peak t5rank / ref |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  for r in rows:
    lines.append(
        f"| {r['model']} | {r['kind']} | {r['pairs']} | {r['tokens']:.0f} ({r['cut']:.1%}) | "
        f"{r['t5rank']:.1f} | {r['reference']:.1f} | {r['t5rank'] / r['reference']:.2f}x | "
        f"{r['compile_s']:.0f} s ({r['shapes']}) | {r['padding_t5rank']:.1%} / "
        f"{r['padding_reference']:.1%} | {r['max_diff']:.1e} ({r['score_std']:.2f}) | "
        f"{r['flops'] / 1e9:.2f} | {r['flops_t5rank'] / peak['jax']:.1%} / "
        f"{r['flops_reference'] / peak['jax']:.1%} |")
  tokenized = [r for r in rows if "tokenized" in r]
  if tokenized:
    lines += ["", "Tokenization alone (host, same texts): t5rank's `MonoT5.encode` and pygaggle's "
              "batch tokenizer; same ids = pygaggle's ids equal t5rank's.", "",
              "| model | inputs | pairs tokenized | t5rank pairs/s | pygaggle pairs/s | same ids |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in tokenized:
      lines.append(f"| {r['model']} | {r['kind']} | {r['tokenized']} | "
                   f"{r['tokenize_t5rank']:.0f} | {r['tokenize_reference']:.0f} | "
                   f"{r['same_ids']:.1%} |")
  loads_line = ", ".join(f"{r['model']}: t5rank {r['load']['t5rank']:.1f} s, reference "
                         f"{r['load']['reference']:.1f} s" for r in rows if "load" in r)
  lines += ["", f"Load times: {loads_line}."]
  return "\n".join(lines) + "\n"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--models", default="tiny,t5_small", help="model configs (t5rank.models.config)")
  parser.add_argument("--pairs", action="append",
                      help="pair counts, N,N,... for every model or model=N,N,... for one; "
                      "repeatable (default: 1000,10000,100000)")
  parser.add_argument("--lengths", default=",".join(KINDS), help=f"kinds of input, from {KINDS}")
  parser.add_argument("--threads", type=int, help="cores to use (default: all of this process's)")
  parser.add_argument("--cpu-devices", type=int,
                      help="t5rank's CPU devices (default: one per core, as t5rank score)")
  parser.add_argument("--reference-batch", type=int, default=REFERENCE_BATCH,
                      help="pairs per reference batch (pygaggle's default: 8)")
  parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
  parser.add_argument("--no-progress", action="store_true", help="no progress bars")
  parser.add_argument("--write", action="store_true", help="put the section into BENCHMARKS.md")
  args = parser.parse_args()
  cores = use_cores(args.threads)
  use_cpu_devices(args.cpu_devices)
  try:
    import torch
    import transformers
  except ImportError as e:
    raise SystemExit(f"{e}; the reference needs the optional extra: "
                     ".venv/bin/pip install -e '.[reference]'") from None

  torch.set_num_threads(len(cores))
  models = args.models.split(",")
  kinds = args.lengths.split(",")
  unknown = [k for k in kinds if k not in KINDS]
  if unknown:
    raise SystemExit(f"--lengths: unknown {unknown}; choose from {KINDS}")
  counts = parse_pairs(args.pairs or ["1000,10000,100000"], models)
  start, load = time.perf_counter(), os.getloadavg()[0]
  peak = matmul_peak()
  print(f"threads {len(cores)}, matmul peak: jnp.dot {peak['jax'] / 1e9:.1f} GFLOP/s, "
        f"torch.matmul {peak['torch'] / 1e9:.1f} GFLOP/s", flush=True)
  rows = []
  for name in models:
    with tempfile.TemporaryDirectory() as directory:
      scorers = build_scorers(get_config(name, dropout_rate=0.0), directory, args.seed)
      tokenizer = transformers.T5Tokenizer(vocab_file=scorers.reranker.vocab.path, legacy=True)
      label = f"{name} ({scorers.reranker.config.num_parameters / 1e6:.1f}M)"
      for kind in kinds:
        for n in counts[name]:
          try:
            row = compare(scorers, kind, n, tokenizer=tokenizer,
                          reference_batch=args.reference_batch, progress=not args.no_progress)
          except AgreementError as e:
            raise SystemExit(f"FAILED: {name}: {e}") from None
          row["model"] = label
          if not rows or rows[-1]["model"] != label:
            row["load"] = scorers.load_s
          rows.append(row)
          print({k: v for k, v in row.items() if k != "load"}, flush=True)
  command = ".venv/bin/python benchmarks/reference_speed.py " + " ".join(sys.argv[1:])
  section = report(rows, command=command.strip(), cores=cores, peak=peak,
                   loads=(load, os.getloadavg()[0]), elapsed=time.perf_counter() - start)
  print(section)
  if args.write:
    write_section(os.path.join(REPO, "BENCHMARKS.md"), section)


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  main()
