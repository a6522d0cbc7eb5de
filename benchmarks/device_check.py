"""One prepared check for a lent accelerator: what only a GPU (or TPU) can show, in one call.

    # on the CPU (the demo's fusion weights, shipped with its models): the inputs and the CPU's figures
    # (in runs/devcheck; to travel, copy the inputs and gzip cpu_cascade/*.run: the check reads
    # NAME.run.gz where NAME.run is not there)
    python benchmarks/device_check.py prepare      # the shipped monoT5 and TK, the demo's weights
    # on the device, from the repository root (one table at the end); every section takes longer
    # than one 10-minute call: choose them, e.g. the two cascades (time limits 580 s in all)
    python benchmarks/device_check.py run --inputs runs/devcheck --sections "cascade,T5-base cascade"
    # both with tiny shapes on this CPU, as tests/test_device_check.py runs it
    python benchmarks/device_check.py tiny

What `run` measures, each section within its own time limit (a section that fails or runs out is
reported as such and the others go on):
  peak        the device's bfloat16 and float32 matrix-product rate (a square product)
  precision   `t5rank score` with the demo-recipe monoT5 (trained) on InsuranceQA pairs: its log P
              with float32 and tensorfloat32 products against the CPU's run (`prepare`); the float32
              run twice with a fresh compilation cache: programs compiled, wall clock
  TK          `t5rank score` with TK on the same pairs: compilations (count, seconds), wall clock and
              pairs/s, with TK's own length buckets and with one bucket (`--length-bucket`), that one
              again from the compilation cache, against the CPU's rate
  step        T5-base and T5-large scoring steps in bfloat16 (`t5rank.benchmarking`'s
              `score_step_rate`): TFLOP/s of the encoder and its share of the measured peak
  end to end  `t5rank score` with T5-base (random weights) in bfloat16, first run and from the
              compilation cache (with --profile DIR, that one under cProfile): pairs/s against the step's
  TK vs monoT5  paper-size TK (300-d, 16 heads, random weights) on the same pairs as T5-base
  cascade     `t5rank rerank` with the demo's cascade (the shipped dual encoder, TK, monoT5,
              RankT5, duoT5, each fused by the demo's weights) on the same queries: every row's MRR
              and largest score difference against the CPU's run (for a stage over the top K of
              the one before, also over the queries whose top K is the same on both devices),
              each stage's time and pairs/s, first run and again from the compilation cache
              (with --profile DIR, a third time under cProfile: DIR/cascade.prof)
  T5-base cascade  `t5rank rerank` with Hugging Face-format monoT5 and duoT5 of T5-base's size
              (random weights; what castorini's checkpoints are) in bfloat16: monoT5 over BM25's
              top 100, duoT5 over its top 10, of the first HF_QUERIES queries: each stage's
              pairs/s, first run and cached
  serve       `t5rank serve` with the shipped monoT5 under 1, 8 and 32 concurrent clients on
              loopback (`serve_load.measure`: InsuranceQA requests of 20 to 100 answers with
              their BM25 scores): pairs/s against `t5rank score`'s offline rate on the same pairs,
              median and p99 latency, failed and lost requests, then past the queue limit only
              503s; start-up to ready and the exit status after SIGTERM (not run by `tiny` unless
              named in --sections)
`prepare` writes the inputs (the first --queries test queries' pools, their answers, judgments,
BM25's run, the demo's fusion weights), the CPU's reference scores, rates and cascade, and a
paper-size TK built on --tk's word list.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout (shipped weights)

SEED = 0
HF_QUERIES = 50  # the T5-base cascade's queries (their BM25 top 100 and top 10)

# `t5rank ...` in a fresh process, with its compilations counted (JAX's monitoring events)
_COUNTING = """
import collections, cProfile, json, os, sys, time
import jax.monitoring as m
n, s = collections.Counter(), collections.Counter()
m.register_event_listener(lambda e, **k: n.update([e]))
m.register_event_duration_secs_listener(lambda e, d, **k: (n.update([e]), s.update({e: d})))
from t5rank.cli import main
start = time.perf_counter()
if os.environ.get("DEVICE_CHECK_PROFILE"):  # the host's time per function (cProfile's stats)
  profile = cProfile.Profile()
  code = profile.runcall(main, sys.argv[1:])
  profile.dump_stats(os.environ["DEVICE_CHECK_PROFILE"])
else:
  code = main(sys.argv[1:])
print("COUNTS " + json.dumps({"wall": time.perf_counter() - start, "code": code,
      "compiled": n["/jax/core/compile/backend_compile_duration"],
      "compile_s": s["/jax/core/compile/backend_compile_duration"],
      "cache_hits": n["/jax/compilation_cache/cache_hits"],
      "cache_misses": n["/jax/compilation_cache/cache_misses"]}))
"""


def t5rank(argv: list[str], timeout: float, cache: Optional[str] = None,
           profile: Optional[str] = None) -> dict:
  """Runs `t5rank argv` in a new process (compilation cache off, or in `cache`; with `profile`,
  under cProfile, its stats written there); returns its wall clock, compilations and exit status,
  or {"timeout": seconds} when it ran out of time."""
  env = dict(os.environ, PYTHONUNBUFFERED="1", T5RANK_COMPILATION_CACHE="1" if cache else "0",
             T5RANK_CACHE_DIR=cache or "", DEVICE_CHECK_PROFILE=profile or "")
  start = time.perf_counter()
  try:
    done = subprocess.run([sys.executable, "-c", _COUNTING, *argv], env=env, capture_output=True,
                          text=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return {"timeout": time.perf_counter() - start}
  counts = [line for line in done.stdout.splitlines() if line.startswith("COUNTS ")]
  if done.returncode or not counts:
    raise RuntimeError(f"t5rank {argv[0]} failed ({done.returncode}): {done.stderr[-600:]}")
  return json.loads(counts[-1][len("COUNTS "):])


def score_argv(inputs: str, checkpoint: str, output: str, *extra: str) -> list[str]:
  return ["score", "--checkpoint", checkpoint, "--queries", f"{inputs}/queries.tsv",
          "--corpus", f"{inputs}/corpus.jsonl.gz", "--run", f"{inputs}/bm25.run.gz",
          "--output", output, "--window", "0", *extra]


def cascade_argv(inputs: str, output: str, tune: bool = False) -> list[str]:
  """`t5rank rerank` with the demo's cascade: its shipped models at its depths, each fused by the
  demo's weights (with `tune`: by weights tuned on these queries), evaluated on the
  inputs' judgments."""
  from t5rank.pipelines.insuranceqa_catalogue import ENGLISH_CASCADE

  weights = ["--tune-fusion"] if tune else ["--fusion-weights", f"{inputs}/fusion.json"]
  argv = ["rerank", "--queries", f"{inputs}/queries.tsv", "--corpus", f"{inputs}/corpus.jsonl.gz",
          "--run", f"{inputs}/bm25.run.gz", "--qrels", f"{inputs}/qrels.txt", *weights,
          "-o", output]
  for (row, model), depth in zip(ENGLISH_CASCADE.rerankers, ENGLISH_CASCADE.depths):
    argv += ["--stage", f"{row}=shipped:{model}@{depth}", "--fuse"]
  return argv


def cascade_rows(output: str) -> dict[str, dict]:
  """{row: {"MRR", "seconds", "pairs/s", "run", "previous" (the row it reranked), "depth"}} of a
  `t5rank rerank` results.json."""
  with open(f"{output}/results.json") as f:
    results = json.load(f)
  rows = {s["name"]: {"MRR": s["mean"]["MRR"], "previous": s.get("previous")}
          for s in results["evaluation"]["stages"]}
  for stage in results["stages"]:
    rows[stage["name"]]["depth"] = stage.get("depth")
  for t in results["timings"]:
    rows[t["name"]].update(seconds=t.get("seconds"), pairs=t.get("pairs"),
                           rate=t.get("pairs_per_second"))
  for name, path in results["runs"].items():
    run = os.path.join(output, os.path.basename(path))
    rows[name]["run"] = run if os.path.exists(run) else run + ".gz"  # compressed to travel
  return rows


def same_input_differences(run: str, reference: str, before: str, before_reference: str,
                           depth: int) -> Optional[tuple[float, list[str], int]]:
  """A stage's largest |d score| over the queries whose top `depth` of the ranking it reranked
  (`before`, `before_reference`) holds the same documents on both devices, and the queries
  where it does not (a tie broken the other way changes what a pairwise stage compares), and the
  number of queries; None when the stage reranked every query's candidates."""
  from t5rank.data.readers import read_run
  top_a, top_b = read_run(before), read_run(before_reference)
  if all(len(docs) <= depth for docs in top_b.values()):
    return None  # every candidate reranked: nothing to differ
  a, b = read_run(run), read_run(reference)
  differ = sorted(q for q in top_b if {d for d, _ in top_a[q][:depth]} !=
                  {d for d, _ in top_b[q][:depth]})
  same = [abs(s - dict(b[q])[d]) for q in b if q not in differ for d, s in a[q][:depth]]
  return max(same, default=float("nan")), differ, len(top_b)


def log_p_differences(run: str, reference: str) -> float:
  """The largest |d score| of the same (query, document) in two runs."""
  from t5rank.data.readers import read_run
  a, b = read_run(run), read_run(reference)
  return max(abs(s - dict(b[q])[d]) for q, docs in a.items() for d, s in docs)


# ------------------------------------------------------------------------------------- prepare


def paper_size_tk(words_from: str, out: str) -> str:
  """A TK of the paper's size (300-d, 16 heads of 32) with random weights, on `words_from`'s word
  list (a TK checkpoint): for speed, which does not depend on the weights."""
  import jax

  from t5rank.models.tk import tk_config
  from t5rank.training.pairwise import PairwiseTK

  trainable = PairwiseTK(tk_config(words_from, embedding_dim=300, num_heads=16))
  params = trainable.init_params(jax.random.PRNGKey(SEED), _no_init())
  trainable.export(out, jax.tree.map(np.asarray, params), {"step": 0, "note": "random weights"})
  return out


def _no_init():
  from t5rank.training.trainer import Init
  return Init()


def prepare(args: argparse.Namespace) -> None:
  from t5rank.checkpoints import shipped
  from t5rank.data.insuranceqa import load_split
  from t5rank.data.readers import Document
  from t5rank.retrieval.bm25 import BM25

  out = args.out
  os.makedirs(out, exist_ok=True)
  split = load_split("test", "en", args.queries)
  corpus = {d: Document(split.answers[d]) for d in sorted({d for pool in split.pools.values()
                                                          for d in pool}, key=int)}
  queries = split.queries
  with open(f"{out}/queries.tsv", "w") as f:
    f.writelines(f"{q}\t{t}\n" for q, t in queries.items())
  with gzip.open(f"{out}/corpus.jsonl.gz", "wt") as f:
    f.writelines(json.dumps({"id": d, "text": doc.text}) + "\n" for d, doc in corpus.items())
  retriever = BM25.open(corpus, None)  # Anserini's k1 .9, b .4, as the demo
  run = retriever.retrieve(queries, k=1000, candidates={q: [(d, 0.0) for d in pool]
                                                        for q, pool in split.pools.items()})
  with gzip.open(f"{out}/bm25.run.gz", "wt") as f:
    f.writelines(f"{q} Q0 {d} {r + 1} {s!r} bm25\n" for q, docs in run.items()
                 for r, (d, s) in enumerate(docs))
  with open(f"{out}/qrels.txt", "w") as f:
    f.writelines(f"{q} 0 {d} 1\n" for q, docs in split.relevant.items() for d in docs)
  shutil.copyfile(args.fusion_weights, f"{out}/fusion.json")
  pairs = sum(map(len, run.values()))
  print(f"{len(queries)} queries, {len(corpus)} answers, {pairs} pairs", flush=True)
  for name, source in (("monot5", args.monot5), ("tk", args.tk)):
    shutil.copytree(shipped.resolve(source), f"{out}/{name}", dirs_exist_ok=False)
  paper_size_tk(f"{out}/tk", f"{out}/tk_paper")
  cpu = {"pairs": pairs}
  for name in ("monot5", "tk"):
    result = t5rank(score_argv(out, f"{out}/{name}", f"{out}/cpu_{name}.run"), timeout=1800)
    cpu[name] = result
    print(f"CPU {name}: {result}", flush=True)
  cpu["cascade"] = t5rank(cascade_argv(out, f"{out}/cpu_cascade"), timeout=3600)
  print(f"CPU cascade: {cpu['cascade']}", flush=True)
  with open(f"{out}/cpu.json", "w") as f:
    json.dump(cpu, f, indent=1)


# ----------------------------------------------------------------------------------------- run


class Report:
  """Rows (section, measure, value, note) printed as one table at the end."""

  def __init__(self, path: Optional[str] = None):
    self.rows: list[tuple[str, str, str, str]] = []
    self.path = path  # rewritten after every row: a check stopped half-way keeps what it found

  def add(self, section: str, measure: str, value, note: str = "") -> None:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    self.rows.append((section, measure, text, note))
    print(f"[{section}] {measure}: {text} {note}", flush=True)
    if self.path:
      with open(self.path, "w") as f:
        f.write(self.table() + "\n")

  def section(self, name: str, budget: float, fn: Callable[[float], None]) -> None:
    start = time.perf_counter()
    try:
      fn(budget)
    except Exception as e:  # a failed section is a finding, not the end of the check
      self.add(name, "FAILED", type(e).__name__, str(e)[:300].replace("\n", " "))
    self.add(name, "section seconds", time.perf_counter() - start)

  def table(self) -> str:
    lines = ["| section | measure | value | note |", "| --- | --- | --- | --- |"]
    lines += [f"| {' | '.join(r)} |" for r in self.rows]
    return "\n".join(lines)


def matmul_rate(n: int, dtype: str, precision: str = "default", repeats: int = 10) -> float:
  """TFLOP/s of an n x n x n product on the default device (random operands)."""
  import jax
  import jax.numpy as jnp

  keys = jax.random.split(jax.random.PRNGKey(0))
  a, b = (jax.random.normal(k, (n, n), jnp.float32).astype(dtype) for k in keys)
  product = jax.jit(lambda x, y: jnp.matmul(x, y, precision=precision))
  product(a, b).block_until_ready()
  start = time.perf_counter()
  for _ in range(repeats):
    out = product(a, b)
  out.block_until_ready()
  return 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e12


def run(args: argparse.Namespace) -> Report:
  import jax

  inputs, work = args.inputs, args.work or tempfile.mkdtemp(prefix="device_check.")
  with open(f"{inputs}/cpu.json") as f:
    cpu = json.load(f)
  report = Report(args.table)
  if args.profile:
    os.makedirs(args.profile, exist_ok=True)
  device = jax.devices()[0]
  report.add("device", "kind", f"{device.device_kind} ({device.platform})",
             f"jax {jax.__version__}, {len(jax.devices())} device(s)")
  tiny = args.tiny
  peak = {}

  def peak_section(budget: float) -> None:
    n = 256 if tiny else 8192
    peak["bfloat16"] = matmul_rate(n, "bfloat16")
    report.add("peak", f"bfloat16 {n}^3 product", peak["bfloat16"], "TFLOP/s")
    report.add("peak", f"float32 {n}^3 product, highest", matmul_rate(n, "float32", "highest"),
               "TFLOP/s")
    report.add("peak", f"float32 {n}^3 product, tensorfloat32", matmul_rate(n, "float32", "high"),
               "TFLOP/s")

  def precision_section(budget: float) -> None:
    cache = f"{work}/fresh_cache"  # this section's own: its first run compiles everything
    runs = (("float32, first run", "float32", "first"), ("float32, second run", "float32", "second"),
            ("tensorfloat32", "tensorfloat32", "tf32"))
    import jax

    for label, precision, name in runs:
      if precision != "float32" and jax.devices()[0].platform == "cpu":
        report.add("precision", f"monoT5 {label}", "not run",
                   "t5rank score refuses --precision other than float32 on a CPU (it means "
                   "nothing there)")
        continue
      out = f"{work}/monot5_{name}.run"
      result = t5rank(score_argv(inputs, f"{inputs}/monot5", out, "--precision", precision),
                      timeout=budget / 2 if name == "first" else budget / 4, cache=cache)
      if "timeout" in result:
        report.add("precision", f"monoT5 {label}", "ran out of time",
                   f"{result['timeout']:.0f} s")
        continue
      report.add("precision", f"monoT5 {label}: max |d log P| vs CPU run",
                 log_p_differences(out, f"{inputs}/cpu_monot5.run"),
                 f"{cpu['pairs']} pairs; {result['wall']:.1f} s; {result['cache_misses']} "
                 f"compiled, {result['cache_hits']} from the cache")

  def tk_section(budget: float) -> None:
    rate = cpu["pairs"] / cpu["tk"]["wall"]
    report.add("TK", "CPU (2-core VM): t5rank score", rate, f"pairs/s, {cpu['tk']['wall']:.1f} s, "
               f"{cpu['tk']['compiled']} compilations ({cpu['tk']['compile_s']:.1f} s)")
    cache = f"{work}/tk_cache"
    for label, extra in (("one bucket", ["--length-bucket", "1000"]),
                         ("one bucket, cached", ["--length-bucket", "1000"]),
                         ("TK's buckets (32 words)", [])):
      out = f"{work}/tk_{label.replace(' ', '_').replace(',', '')}.run"
      result = t5rank(score_argv(inputs, f"{inputs}/tk", out, *extra), timeout=budget / 3,
                      cache=cache)
      if "timeout" in result:
        report.add("TK", f"{label}: t5rank score", "ran out of time",
                   f"{result['timeout']:.0f} s")
        continue
      pairs_s = cpu["pairs"] / result["wall"]
      report.add("TK", f"{label}: t5rank score", pairs_s,
                 f"pairs/s, {result['wall']:.1f} s, {pairs_s / rate:.1f}x the CPU; "
                 f"{result['cache_misses']} compiled ({result['compile_s']:.1f} s), "
                 f"{result['cache_hits']} from the cache")
      report.add("TK", f"{label}: max |d s| vs CPU run", log_p_differences(out, f"{inputs}/cpu_tk.run"))

  def step_section(budget: float) -> None:
    from t5rank.benchmarking import score_step_rate

    runs = ([("tiny", 8, 32)] if tiny else
            [("t5_base", 128, 256), ("t5_base", 512, 256), ("t5_large", 256, 256)])
    for name, batch, length in runs:
      for row in score_step_rate(name, batch, length, 3 if tiny else 20, dtypes=("bfloat16",)):
        share = row["tflops"] / peak["bfloat16"] if peak.get("bfloat16") else float("nan")
        report.add("step", f"{name} bfloat16 {batch} x {length}", row["tflops"],
                   f"encoder TFLOP/s, {share:.0%} of the measured peak; {row['rate']:.0f} "
                   f"pairs/s; compile {row['compile']:.1f} s")

  def end_to_end_section(budget: float) -> None:
    from t5rank.models.config import get_config
    from t5rank.models.t5_weights import save_checkpoint
    from t5rank.testing import random_params

    name = "tiny" if tiny else "t5_base"
    config = get_config(name, dropout_rate=0.0)
    checkpoint = f"{work}/{name}"
    if not os.path.exists(checkpoint):
      save_checkpoint(checkpoint, random_params(config, seed=SEED, std=0.05), config,
                      {"feature_lengths": {"inputs": 256}})
    cache = f"{work}/e2e_cache"
    for model, (label, ckpt, extra) in enumerate((
        (f"monoT5 {name} bfloat16", checkpoint, ["--dtype", "bfloat16", "--length-bucket", "256"]),
        ("TK paper size", f"{inputs}/tk_paper", ["--length-bucket", "1000"]))):
      for run_label in ("first run", "cached"):  # the second: start-up without compilation
        profile = (f"{args.profile}/e2e_{model}.prof" if args.profile and run_label == "cached"
                   else None)
        result = t5rank(score_argv(inputs, ckpt, f"{work}/e2e_{model}_{run_label[0]}.run",
                                   *extra), timeout=budget / 4, cache=cache, profile=profile)
        if "timeout" in result:
          report.add("end to end", f"{label}, {run_label}", "ran out of time")
          continue
        report.add("end to end", f"{label}, {run_label}: t5rank score",
                   cpu["pairs"] / result["wall"],
                   f"pairs/s over {cpu['pairs']} pairs, {result['wall']:.1f} s with start-up; "
                   f"{result['cache_misses']} compiled ({result['compile_s']:.1f} s), "
                   f"{result['cache_hits']} from the cache" + (" (profiled)" if profile else ""))

  def cascade_section(budget: float) -> None:
    reference = cascade_rows(f"{inputs}/cpu_cascade")
    cache = f"{work}/cascade_cache"
    labels = ("first run", "cached") if not tiny else ("first run",)
    shares = {"first run": 0.6, "cached": 0.4}
    if args.profile:  # a third run from the cache, under cProfile: where the host's time goes
      labels = labels + ("profiled",)
      shares = {"first run": 0.45, "cached": 0.25, "profiled": 0.3}
    for label in labels:
      out = f"{work}/cascade_{label.replace(' ', '_')}"
      profile = f"{args.profile}/cascade.prof" if label == "profiled" else None
      result = t5rank(cascade_argv(inputs, out), timeout=budget * shares[label], cache=cache,
                      profile=profile)
      if "timeout" in result:
        report.add("cascade", label, "ran out of time", f"{result['timeout']:.0f} s")
        continue
      report.add("cascade", f"{label}: t5rank rerank", f"{result['wall']:.1f} s",
                 f"CPU (2-core VM) {cpu['cascade']['wall']:.1f} s; {result['cache_misses']} "
                 f"compiled, {result['cache_hits']} from the cache")
      rows = cascade_rows(out)
      for name, row in rows.items():
        cpu_row = reference[name]
        speed = (f"; {row['seconds']} s, {row['rate']:.0f} pairs/s (CPU {cpu_row['seconds']} s, "
                 f"{cpu_row['rate']:.0f})" if row.get("rate") else "")
        report.add("cascade", f"{label}: {name} MRR", f"{row['MRR']:.4f}",
                   f"CPU {cpu_row['MRR']:.4f}; max |d score| "
                   f"{log_p_differences(row['run'], cpu_row['run']):.2g}{speed}")
        if row.get("depth") and row.get("previous"):  # a stage over the top of the one before
          before = row["previous"]
          found = same_input_differences(row["run"], cpu_row["run"], rows[before]["run"],
                                         reference[before]["run"], row["depth"])
          if found is None:
            continue
          most, differ, total = found
          report.add("cascade", f"{label}: {name}, same top {row['depth']} of {before} on both "
                     "devices: max |d score|", most, f"{len(differ)} of {total} "
                     f"queries' top {row['depth']} differ"
                     + (f": {' '.join(differ[:10])}" if differ else ""))

  def t5_base_cascade_section(budget: float) -> None:
    from t5rank.models.config import get_config
    from t5rank.models.t5_weights.hf import save_hf_checkpoint
    from t5rank.testing import random_params

    name = "tiny" if tiny else "t5_base"
    config = get_config(name, dropout_rate=0.0)
    for seed, family in enumerate(("monot5", "duot5")):
      if not os.path.exists(f"{work}/hf_{family}"):
        save_hf_checkpoint(f"{work}/hf_{family}", random_params(config, seed=seed), config)
    # the first HF_QUERIES queries: T5-base's first run compiles for minutes on a GPU
    from t5rank.data.readers import read_queries, read_run, write_run
    queries = dict(list(read_queries(f"{inputs}/queries.tsv").items())[:HF_QUERIES])
    with open(f"{work}/hf_queries.tsv", "w") as f:
      f.writelines(f"{q}\t{t}\n" for q, t in queries.items())
    write_run(f"{work}/hf_bm25.run", {q: docs for q, docs in read_run(
        f"{inputs}/bm25.run.gz").items() if q in queries}, tag="bm25")
    cache = f"{work}/hf_cache"
    for label in ("first run", "cached") if not tiny else ("first run",):
      out = f"{work}/hf_cascade_{label.replace(' ', '_')}"
      result = t5rank(["rerank", "--queries", f"{work}/hf_queries.tsv", "--corpus",
                       f"{inputs}/corpus.jsonl.gz", "--run", f"{work}/hf_bm25.run",
                       "--stage", f"monot5={work}/hf_monot5@100", "--reranker", "monot5",
                       "--stage", f"duot5={work}/hf_duot5@10", "--reranker", "duot5",
                       "--dtype", "bfloat16", "-o", out],
                      timeout=budget * (0.6 if label == "first run" else 0.4), cache=cache)
      if "timeout" in result:
        report.add("T5-base cascade", label, "ran out of time", f"{result['timeout']:.0f} s")
        continue
      with open(f"{out}/results.json") as f:
        timings = json.load(f)["timings"]
      report.add("T5-base cascade", f"{label}: t5rank rerank ({name}, bfloat16)",
                 f"{result['wall']:.1f} s", f"{result['cache_misses']} compiled, "
                 f"{result['cache_hits']} from the cache")
      for t in timings[1:]:
        report.add("T5-base cascade", f"{label}: {t['name']}", t["pairs_per_second"],
                   f"pairs/s; {t['pairs']} pairs in {t['seconds']} s")

  def serve_section(budget: float) -> None:
    import serve_load

    def row(phase: dict, result: dict) -> None:
      failed = sum(n for status, n in phase["statuses"].items() if status != 200)
      report.add("serve", f"{phase['clients']} clients: pairs/s", phase["rate"],
                 f"{phase['rate'] / result['offline']['rate']:.0%} of offline; median "
                 f"{phase['median_ms']:.0f} ms, p99 {phase['p99_ms']:.0f} ms; {phase['answered']} "
                 f"of {phase['requests']} answered, {failed} failed, {phase['lost']} lost")

    seconds = max(5.0, (budget - 60) / 4.5)  # start-up, offline; 3 phases and half a one past
    result = serve_load.measure(f"{inputs}/monot5", seconds=seconds, overload_seconds=seconds / 2,
                                queries=60 if tiny else 300, start_timeout=budget / 3)
    report.add("serve", "offline: t5rank score", result["offline"]["rate"],
               f"pairs/s over {result['offline']['pairs']} pairs; server ready in "
               f"{result['ready_s']:.1f} s")
    for phase in result["phases"]:
      row(phase, result)
    past = result["overload"]
    others = sum(n for status, n in past["statuses"].items() if status not in (200, 503))
    report.add("serve", f"{past['clients']} clients past the queue: 503s",
               past["statuses"].get(503, 0), f"{past['answered']} answered, {others} other "
               f"failures, {past['lost']} lost, {past['retry_after_missing']} without Retry-After")
    report.add("serve", "exit status after SIGTERM", result["exit"])

  budgets = {"peak": 30, "precision": 150, "TK": 150, "step": 100, "end to end": 130,
             "cascade": 330, "T5-base cascade": 250, "serve": 180}
  # with tiny shapes on a CPU: a fifth, but the cascades' one run each loads every model, and
  # each of precision's three runs starts a process (a fifth left its second run 7.5 s: a busy
  # 2-core CI machine's start-up alone)
  tiny_share = {"cascade": 0.5, "T5-base cascade": 0.5, "precision": 0.5}
  sections = {"peak": peak_section, "precision": precision_section, "TK": tk_section,
              "step": step_section, "end to end": end_to_end_section, "cascade": cascade_section,
              "T5-base cascade": t5_base_cascade_section, "serve": serve_section}
  for given in filter(None, (args.seconds or "").split(",")):  # e.g. "cascade=420"
    name, _, seconds = (part.strip() for part in given.partition("="))
    if name not in budgets:
      raise SystemExit(f"--seconds: no section {name!r} (the sections: {', '.join(budgets)})")
    budgets[name] = float(seconds)
  for name, fn in sections.items():
    if tiny and name == "serve" and not args.sections:  # minutes of load: only when named
      continue
    if not args.sections or name in args.sections.split(","):
      report.section(name, budgets[name] * (tiny_share.get(name, 0.2) if tiny else 1), fn)
  print(report.table(), flush=True)
  return report


# ---------------------------------------------------------------------------------------- tiny


def tiny(args: argparse.Namespace) -> Report:
  """prepare + run with micro models and synthetic text on this CPU (tests/test_device_check.py)."""
  import jax

  from t5rank.models.config import get_config
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.models.tk import tk_config
  from t5rank.models.words import WordVocabulary, save_embeddings
  from t5rank.testing import random_params
  from t5rank.training.pairwise import PairwiseTK

  out = args.out
  os.makedirs(out, exist_ok=True)
  words = "car life policy cover claim premium term annuity income home".split()
  rng = np.random.default_rng(0)
  docs = {f"d{i}": " ".join(rng.choice(words, 12 + i % 40)) for i in range(60)}
  queries = {f"q{i}": " ".join(rng.choice(words, 4)) for i in range(6)}
  with open(f"{out}/queries.tsv", "w") as f:
    f.writelines(f"{q}\t{t}\n" for q, t in queries.items())
  with gzip.open(f"{out}/corpus.jsonl.gz", "wt") as f:
    f.writelines(json.dumps({"id": d, "text": t}) + "\n" for d, t in docs.items())
  with gzip.open(f"{out}/bm25.run.gz", "wt") as f:
    f.writelines(f"{q} Q0 d{i} {i + 1} {30 - i}.0 bm25\n" for q in queries for i in range(30))
  config = get_config("tiny", dropout_rate=0.0)
  save_checkpoint(f"{out}/monot5", random_params(config, seed=1, std=0.2), config)
  vocabulary = WordVocabulary.build(docs.values(), min_count=1)
  vectors = rng.normal(size=(vocabulary.size, 8)).astype(np.float32)
  save_embeddings(f"{out}/words", vocabulary, vectors, {"source": "device_check tiny"})
  tk = PairwiseTK(tk_config(f"{out}/words", embedding_dim=8, num_heads=2))
  tk.export(f"{out}/tk", jax.tree.map(np.asarray, tk.init_params(jax.random.PRNGKey(0),
                                                                  _no_init())), {"step": 0})
  shutil.copytree(f"{out}/tk", f"{out}/tk_paper")
  with open(f"{out}/qrels.txt", "w") as f:
    f.writelines(f"{q} 0 d{i} 1\n" for i, q in enumerate(queries))
  cpu = {"pairs": 6 * 30}
  for name in ("monot5", "tk"):
    cpu[name] = t5rank(score_argv(out, f"{out}/{name}", f"{out}/cpu_{name}.run"), timeout=300)
  # the CPU's cascade, its fusion weights tuned on these queries (as the demo tunes them on
  # validation queries): the same runs as the cascade given those weights
  cpu["cascade"] = t5rank(cascade_argv(out, f"{out}/cpu_cascade", tune=True), timeout=300)
  shutil.copyfile(f"{out}/cpu_cascade/results.json", f"{out}/fusion.json")
  with open(f"{out}/cpu.json", "w") as f:
    json.dump(cpu, f, indent=1)
  args.inputs, args.work, args.profile, args.seconds = out, f"{out}/work", None, None
  os.makedirs(args.work, exist_ok=True)
  return run(args)


def main() -> None:
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  commands = parser.add_subparsers(dest="command", required=True)
  p = commands.add_parser("prepare", help="the inputs and the CPU's figures")
  p.add_argument("--out", default="runs/devcheck")
  p.add_argument("--monot5", default="shipped:monot5",
                 help="a monoT5 checkpoint of the demo's recipe (default: the shipped one)")
  p.add_argument("--tk", default="shipped:tk", help="a TK checkpoint (default: the shipped one)")
  p.add_argument("--fusion-weights",
                 default=os.path.join(REPO, "t5rank", "shipped", "insuranceqa_cascade_weights.json"),
                 help="the cascade's fusion weights: a `t5rank rerank --tune-fusion` or `t5rank "
                      "demo` results.json, or the shipped file (the default: the demo's)")
  p.add_argument("--queries", type=int, default=300, help="test queries whose pools are scored")
  r = commands.add_parser("run", help="the check, on the device")
  r.add_argument("--inputs", default="runs/devcheck")
  r.add_argument("--work", help="scratch directory (default: a new temporary one)")
  r.add_argument("--sections", help="comma-separated subset of the sections")
  r.add_argument("--table", help="also write the table to this file")
  r.add_argument("--seconds", help="comma-separated SECTION=SECONDS: a section's time limit "
                 "instead of its default (e.g. \"cascade=420,end to end=150\")")
  r.add_argument("--profile", help="the cascade once more from the cache under cProfile, and the "
                 "end-to-end section's cached runs under it: their stats in PROFILE/cascade.prof, "
                 "PROFILE/e2e_0.prof (T5-base), PROFILE/e2e_1.prof (TK)")
  t = commands.add_parser("tiny", help="prepare and run with tiny shapes on this CPU")
  t.add_argument("--out", required=True)
  t.add_argument("--sections")
  t.add_argument("--table")
  args = parser.parse_args()
  if args.command == "prepare":
    prepare(args)
  elif args.command == "run":
    args.tiny = False
    run(args)
  else:
    args.tiny = True
    tiny(args)


if __name__ == "__main__":
  main()
