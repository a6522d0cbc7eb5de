"""Helpers shared by the scripts under benchmarks/ (run from a checkout with t5rank installed):

- reports: the machine a figure was measured on, a BENCHMARKS.md section replaced in place;
- pairs: InsuranceQA v2 test questions with their candidate answers, as the speed benchmarks take
  them (`insuranceqa_candidates`, `insuranceqa_pairs`);
- timing: `t5rank score`'s device loop over given ids (`scoring_batches`, `score_timed`) and
  monoT5's scoring step on one shape (`score_step_rate`);
- data-poor trials: one tiny model trained and evaluated per (size, variant, trial), the finished
  trials tabulated and plotted (benchmarks/target_words_data_poor.py, classifier_data_poor.py).
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import textwrap
import time
from typing import Sequence

import numpy as np

from t5rank.data.readers import Document
from t5rank.models.reranker import Batch
from t5rank.ranking.candidates import Pair, candidate_passages
from t5rank.ranking.scorer import ScoringOptions

# ---------------------------------------------------------------------------------------------------
# Reports.


def cpu() -> str:
  """This CPU in one line: its name, 'family F model M', and its bfloat16 instructions (the
  figures of one CPU name differ by family: AMD EPYC family 25 model 1 has no AVX-512)."""
  fields, flags = {}, set()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "cpu family", "model") and key not in fields:
          fields[key] = value.strip()
        if key == "flags" and not flags:
          flags = set(value.split())
  except OSError:
    return platform.processor() or "unknown CPU"
  bf16 = sorted(flags & {"avx512_bf16", "amx_bf16"})
  return (f"{fields.get('model name', platform.processor() or 'unknown CPU')}, family "
          f"{fields.get('cpu family', '?')} model {fields.get('model', '?')}, "
          f"{', '.join(bf16) if bf16 else 'no bfloat16 instructions'}")


def machine() -> str:
  """The CPU (`cpu`), core count, Python and jax versions and jax's devices, in one line."""
  import jax

  nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
  return (f"nproc {nproc}, {cpu()}; Python {platform.python_version()}, jax {jax.__version__} on "
          f"{jax.devices()[0].platform}, {jax.local_device_count()} device(s)")


def matmul_peak(size: int = 2048, repeats: int = 5) -> dict[str, float]:
  """Best FLOP/s of `repeats` (size x size) products on this process's cores: "float32", and
  "bfloat16" (bfloat16 operands, float32 result)."""
  import jax
  import jax.numpy as jnp

  rng = np.random.default_rng(0)
  a, b = (jax.device_put(rng.standard_normal((size, size), np.float32)) for _ in range(2))
  products = {
      "float32": (jax.jit(jnp.dot), a, b),
      "bfloat16": (jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32)),
                   a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))}
  best = {}
  for name, (product, x, y) in products.items():
    product(x, y).block_until_ready()
    best[name] = 0.0
    for _ in range(repeats):
      start = time.perf_counter()
      product(x, y).block_until_ready()
      best[name] = max(best[name], 2 * size ** 3 / (time.perf_counter() - start))
  return best


def write_section(path: str, section: str) -> None:
  """Replaces the section of `path` whose heading is `section`'s first line (or appends it), leaving
  the other sections as they are."""
  text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
  heading = section.split("\n", 1)[0]
  pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
  if pattern.search(text):
    text = pattern.sub(lambda _: section + "\n", text, count=1)
  else:
    text = text.rstrip("\n") + ("\n\n" if text else "") + section
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def padding_fraction(batches: Sequence[Batch]) -> float:
  """Fraction of padding ids in the batches' tokens."""
  total = sum(b.arrays[0].size for b in batches)
  return 1 - sum(int((b.arrays[0] != 0).sum()) for b in batches) / total


# ---------------------------------------------------------------------------------------------------
# Pairs.

KINDS = ("short", "windows", "long512")  # the kinds of input of `insuranceqa_pairs`
ANSWERS_PER_DOCUMENT = 4


def insuranceqa_candidates(num_pairs: int) -> tuple[dict, dict, dict]:
  """(queries, corpus, candidates) of the first test questions with their ~200 candidates each,
  cut to `num_pairs` pairs, taking answers from many questions so that lengths vary."""
  from t5rank.data.insuranceqa import clean, load_records

  test, answers = load_records("test", "en")
  per_query = 16
  queries, candidates, corpus = {}, {}, {}
  for qid, item in test.items():
    if len(queries) * per_query >= num_pairs:
      break
    queries[qid] = clean(item["en"])
    docids = (item["answers"] + item["negatives"])[:per_query]
    candidates[qid] = [(d, 0.0) for d in docids]
    corpus.update({d: Document(clean(answers[d]["en"])) for d in docids})
  return queries, corpus, candidates


def insuranceqa_pairs(kind: str, num_pairs: int) -> tuple[
    dict[str, str], list[Pair], dict[str, list[str]], ScoringOptions]:
  """(queries, pairs, passages, options): the first `num_pairs` inputs of `kind` from InsuranceQA v2
  test questions, in id order, each with its whole pool (relevant answers and negatives, sorted by
  answer id) until there are enough; the last pool may be cut. Kinds:
    short     the answers as they are (one passage per candidate, `--window 0`);
    windows   documents of ANSWERS_PER_DOCUMENT consecutive answers of the query's pool (the
              candidate and the next three) split into `t5rank score`'s MaxP windows; a pair is one
              window;
    long512   the same documents whole (`--window 0`), so nearly every input is cut to 512."""
  from t5rank.data.insuranceqa import load_split

  if kind not in KINDS:
    raise ValueError(f"unknown kind of input {kind!r}; choose from {KINDS}")
  data = load_split("test", "en")
  options = ScoringOptions() if kind == "windows" else ScoringOptions(window=0)
  queries, pairs, passages = {}, [], {}
  for qid, pool in data.pools.items():
    if len(pairs) >= num_pairs:
      break
    if kind == "short":
      corpus = {aid: Document(data.answers[aid]) for aid in pool}
    else:
      corpus = {f"{qid}-{i}": Document(" ".join(
          data.answers[pool[(i + j) % len(pool)]] for j in range(ANSWERS_PER_DOCUMENT)))
                for i in range(len(pool))}
    queries[qid] = data.queries[qid]
    query_pairs, query_passages = candidate_passages(
        {qid: [(docid, 0.0) for docid in corpus]}, corpus, window=options.window,
        stride=options.stride, language=options.language)
    pairs += query_pairs
    passages.update(query_passages)
  if len(pairs) < num_pairs:
    raise ValueError(f"InsuranceQA v2 test has only {len(pairs)} {kind} pairs, {num_pairs} asked")
  return queries, pairs[:num_pairs], passages, options


# ---------------------------------------------------------------------------------------------------
# Timing.


def scoring_batches(reranker, mesh, ids: Sequence[Sequence[int]], options: ScoringOptions
                    ) -> list[Batch]:
  """t5rank score's batches: the reranker's `batches` of each shard of `options.shard_size` pairs,
  with the default token budget of `mesh`; items index into `ids`."""
  from t5rank.ranking.devices import default_batch_tokens

  batch_tokens = options.batch_tokens or default_batch_tokens(mesh, reranker.width)
  batches = []
  for first in range(0, len(ids), options.shard_size):
    for batch in reranker.batches(ids[first:first + options.shard_size],
                                  batch_tokens=batch_tokens, row_multiple=mesh.shape["data"]):
      batches.append(Batch(batch.items + first, batch.arrays))
  return batches


def score_timed(reranker, params, mesh, batches: Sequence[Batch], num_items: int,
                progress: bool = False) -> tuple[np.ndarray, float, float]:
  """(log P(positive) per item, compile seconds, scoring seconds): every shape of `batches` is run
  once first (compilation), then all batches are timed through `score_batches`; `params` are
  placed on `mesh` already."""
  from tqdm import tqdm

  from t5rank.ranking.scorer import score_batches

  run = lambda batches, on_batch=None: score_batches(
      reranker, params, batches, num_items, mesh=mesh, on_batch=on_batch)
  shapes = {b.arrays[0].shape: b for b in batches}
  start = time.perf_counter()
  run(list(shapes.values()))
  compile_s = time.perf_counter() - start
  with tqdm(total=num_items, unit="pair", desc="t5rank", disable=not progress) as bar:
    start = time.perf_counter()
    log_p, _ = run(batches, bar.update)
    score_s = time.perf_counter() - start
  return log_p, compile_s, score_s


def monot5_flops(config, length: int, *, folded: bool = True) -> int:
  """The floating-point operations of monoT5's matrix products for one pair of `length` input
  tokens (what a perfect implementation must execute; 2 per multiply-add): the encoder's
  projections, attention and feed-forward over `length` positions, one decoder step (its
  cross-attention's keys and values folded into the query and output, `folded`, as
  `t5rank.models.network.Attention` does, or projected at every encoder position), and the two
  vocabulary rows. Norms, softmax and activations (a few per element) are left out."""
  d, h, k, f, n = config.d_model, config.num_heads, config.d_kv, config.d_ff, length
  inner = h * k
  mlp = (3 if config.feed_forward == "gated-gelu" else 2) * d * f  # multiply-adds per position
  encoder = n * (4 * d * inner + mlp) + 2 * n * n * inner
  cross = 2 * d * inner + (h * k * d + 2 * h * d * n + h * d * k if folded
                           else 2 * n * d * inner + 2 * n * inner)
  decoder = 4 * d * inner + 2 * inner + cross + mlp
  return 2 * (config.num_encoder_layers * encoder + config.num_decoder_layers * decoder + 2 * d)


def score_step_rate(name: str, batch: int, length: int, repeats: int,
                    dtypes: tuple[str, ...] = ("float32", "bfloat16")) -> list[dict]:
  """One row per dtype: monoT5's scoring step (`t5rank.models.monot5.score_step`) of the model config
  `name` with random weights (std .05) on one batch of `batch` x `length` random ids (no padding),
  compiled, then timed `repeats` times back to back on the default device: "compile" seconds,
  "ms" per step, "rate" pairs/s, "tokens" per second and the encoder's "tflops" (2 x its parameters
  x tokens, a lower bound); with both dtypes, the last row's "difference" is the largest
  |log P(true)| difference between them."""
  import jax

  from t5rank.models.config import get_config
  from t5rank.models.monot5 import score_step
  from t5rank.models.reranker import cast_params
  from t5rank.testing import random_params

  rows, scores = [], {}
  ids = np.random.default_rng(0).integers(3, 32000, (batch, length)).astype(np.int32)
  ids[:, -1] = 1  # EOS
  tokens = jax.device_put(ids)
  for dtype in dtypes:
    config = get_config(name, dropout_rate=0.0, dtype=dtype)
    params = jax.device_put(cast_params(random_params(config, std=0.05), dtype))
    step = jax.jit(lambda p, t, config=config: score_step(p, t, config=config,
                                                          target_ids=(1176, 6136)))
    start = time.perf_counter()
    scores[dtype] = np.asarray(jax.block_until_ready(step(params, tokens))[0], np.float64)
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(repeats):
      out = step(params, tokens)
    jax.block_until_ready(out)
    seconds = (time.perf_counter() - start) / repeats
    encoder = sum(x.size for x in jax.tree.leaves(params["encoder"]))  # the matrices per token
    rows.append({"model": name, "params": f"{config.num_parameters / 1e6:.0f}M", "dtype": dtype,
                 "shape": f"{batch} x {length}", "compile": compile_s,
                 "ms": seconds * 1e3, "rate": batch / seconds,
                 "tokens": batch * length / seconds,
                 "tflops": 2 * encoder * batch * length / seconds / 1e12})
    print(rows[-1], flush=True)
  if len(scores) == 2:
    rows[-1]["difference"] = float(np.abs(scores["bfloat16"] - scores["float32"]).max())
  return rows


# ---------------------------------------------------------------------------------------------------
# Data-poor trials: n positives + n negatives of InsuranceQA's training triples, EPOCHS passes.

EPOCHS = 3


def train_steps(n: int, batch_size: int, epochs: int = EPOCHS) -> int:
  """Steps for `epochs` passes over n positives + n negatives in batches of `batch_size` rows."""
  return math.ceil(epochs * 2 * n / batch_size)


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
  """(mean, half-width of the 95% confidence interval of the mean, t distribution); the half-width
  is nan for fewer than two values."""
  from scipy import stats

  values = np.asarray(values, np.float64)
  if len(values) < 2:
    return float(values.mean()), math.nan
  half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
  return float(values.mean()), float(half)


def random_order_mrr10(num_queries: int, split: str = "validation") -> float:
  """Expected MRR@10 of a uniformly random order of each pool (the first `num_queries` queries of
  the split, as RerankEval takes them): P(first relevant at rank k) = C(N-k, R-1) / C(N, R)."""
  from t5rank.data.insuranceqa import load_split

  data = load_split(split, num_queries=num_queries)
  values = []
  for qid, pool in data.pools.items():
    size, relevant = len(pool), len(set(data.relevant[qid]))
    values.append(sum(math.comb(size - k, relevant - 1) / math.comb(size, relevant) / k
                      for k in range(1, min(10, size - relevant + 1) + 1)))
  return float(np.mean(values))


def read_results(path: str) -> dict[tuple[int, str, int], dict]:
  """(n, variant, trial) -> the finished run's record, from results.jsonl."""
  done = {}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for line in f:
        if line.strip():
          r = json.loads(line)
          done[(r["n"], r["variant"], r["trial"])] = r
  return done


def run_one(n: int, variant: str, trial: int, *, model_dir: str, eval_queries: int,
            learning_rate: float, batch_size: int, bindings: Sequence[str],
            gin_file: str) -> dict:
  """Trains `gin_file`'s model for EPOCHS passes over the data-poor task of target-word `variant`,
  size n and seed `trial`, evaluates it on the pools of the first `eval_queries` validation
  queries; returns its record (its settings, seconds and the evaluation's metrics)."""
  import gin

  from t5rank.training import gin_config
  from t5rank.data.seqio_tasks import data_poor_name

  steps = train_steps(n, batch_size)
  task = data_poor_name(f"insuranceqa_en_8k_monot5_{variant}", n, trial)
  gin.clear_config()
  gin_config.parse_gin([gin_file], [
      f"MIXTURE_OR_TASK_NAME = {task!r}", f"TRAIN_STEPS = {steps}", f"BATCH_SIZE = {batch_size}",
      f"LEARNING_RATE = {learning_rate}", f"SEED = {trial}", f"CHECKPOINT_EVERY = {steps}",
      f"LOG_EVERY = {max(1, steps // 4)}", f"MODEL_DIR = {model_dir!r}",
      f"trainer.Loop.eval_every = {steps}", f"rerank_eval.RerankEval.targets = {variant!r}",
      f"rerank_eval.RerankEval.num_queries = {eval_queries}", *bindings])
  steps, batch_size = gin.query_parameter("%TRAIN_STEPS"), gin.query_parameter("%BATCH_SIZE")
  start = time.perf_counter()  # (the values in force, --gin flags included)
  try:
    metrics = gin_config.train_configured()
  finally:
    gin.clear_config()
  return {"n": n, "variant": variant, "trial": trial, "task": task, "steps": steps,
          "examples": steps * batch_size, "learning_rate": learning_rate,
          "eval_queries": eval_queries, "seconds": round(time.perf_counter() - start, 1),
          **{k.split("/", 1)[1]: float(v) for k, v in metrics.items() if k.startswith("eval/")}}


def table(results: dict, sizes: Sequence[int], variants: Sequence[str], labels: dict[str, str],
          metric: str = "mrr@10", heading: str = "target words") -> tuple[str, dict]:
  """(Markdown table, {(n, variant): (mean, ci95, trials)}) of `metric` over the finished trials,
  one row per variant (named by `labels`), one column per size."""
  cells = {}
  for n in sizes:
    for v in variants:
      values = [r[metric] for (rn, rv, _), r in sorted(results.items()) if rn == n and rv == v]
      if values:
        cells[(n, v)] = (*mean_ci95(values), len(values))
  head = f"| {heading} | " + " | ".join(f"{2 * n // 1000}k examples" for n in sizes) + " |"
  lines = [head, "| --- |" + " --- |" * len(sizes)]
  for v in variants:
    row = []
    for n in sizes:
      if (n, v) not in cells:
        row.append("")
        continue
      mean, half, k = cells[(n, v)]
      row.append(f"{mean:.3f} ± {half:.3f} ({k})" if not math.isnan(half) else f"{mean:.3f} ({k})")
    lines.append(f"| {labels.get(v, v)} | " + " | ".join(row) + " |")
  return "\n".join(lines), cells


def plot(cells: dict, sizes: Sequence[int], variants: Sequence[str], path: str,
         title: str, chance: float, labels: dict[str, str]) -> None:
  """Mean MRR@10 with 95% intervals, one group per variant, one bar per size (Agg, atomic)."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  from t5rank.files import atomic_write

  fig = Figure(figsize=(8, 4), dpi=120)
  FigureCanvasAgg(fig)
  ax = fig.add_subplot()
  x = np.arange(len(variants))
  width = 0.8 / len(sizes)
  for i, n in enumerate(sizes):
    means = [cells.get((n, v), (np.nan,))[0] for v in variants]
    halves = [cells.get((n, v), (0, 0))[1] for v in variants]
    ax.bar(x + (i - (len(sizes) - 1) / 2) * width, means, width,
           yerr=np.nan_to_num(halves), capsize=3, label=f"{2 * n // 1000}k examples")
  ax.axhline(chance, color="gray", linestyle="--", linewidth=1,
             label=f"random order ({chance:.3f})")
  ax.set_xticks(x, [labels.get(v, v) for v in variants])
  ax.set_ylabel("MRR@10 (validation)")
  ax.set_title("\n".join(textwrap.wrap(title, 100)), fontsize=9)
  ax.legend()
  fig.tight_layout()
  with atomic_write(path, "wb") as f:
    fig.savefig(f, format="png")
