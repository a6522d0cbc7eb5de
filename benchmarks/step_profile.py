"""Where monoT5's scoring step spends its time, part by part, beside this machine's product rate.

    .venv/bin/python benchmarks/step_profile.py --write

One batch of `--batch` x `--length` random ids (no padding) through `t5rank.models.monot5.score_step`
of the model config (default t5_small, random weights from seed 0), placed as `t5rank score` places
it on a CPU (one device per core, the rows split over them), compiled, then run `--repeats` times
under jax's profiler. Each operation the profile times is put in one part by the name of the network
code it came from (`part_of`): the encoder's feed-forward products, its attention projections
(query, key, value, out), its attention core (logits, relative-position bias, softmax, weighted
sum), the decoder's one step, and the rest (RMS norms, residual adds, conversions, the embedding).
For each part: milliseconds per step (each device's busy time, over the devices: they run side by
side), its share, the FLOPs it must execute (`part_flops`) and the rate it reaches, against the
machine's rate for one large product measured in the same run
(`t5rank.benchmarking.matmul_peak`).
Both dtypes (`--dtype` float32, bfloat16, or both). `--write` puts the tables into BENCHMARKS.md
under "## Where the scoring step's time goes".
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SECTION = "## Where the scoring step's time goes"
BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "BENCHMARKS.md")
PARTS = ("encoder feed-forward products", "encoder attention projections",
         "encoder attention core", "decoder step", "norms, residuals, conversions, embedding")


def part_of(op_name: str) -> str:
  """The part (one of PARTS) of an operation of the compiled step, from the name of the network
  code it came from (its HLO `op_name` metadata, e.g.
  `jit(score_step)/T5.encode/encoder/layers_3/mlp/wi/dot_general`)."""
  if "T5.decode/" in op_name:
    return PARTS[3]
  if "T5.encode/" in op_name:
    if re.search(r"/mlp/wi(_[01])?/dot_general|/mlp/wo/dot_general", op_name):
      return PARTS[0]
    if re.search(r"/attention/(query|key|value|out)/dot_general", op_name):
      return PARTS[1]
    if "/attention/" in op_name or "/relpos_bias/" in op_name:
      return PARTS[2]
  return PARTS[4]


def part_flops(config, batch: int, length: int) -> dict[str, float]:
  """FLOPs (2 per multiply-add) of each part's matrix products for one batch of `batch` inputs of
  `length` ids: `t5rank.benchmarking.monot5_flops` split by part (the rest executes none)."""
  from t5rank.benchmarking import monot5_flops

  d, inner, layers = config.d_model, config.num_heads * config.d_kv, config.num_encoder_layers
  mlp = (3 if config.feed_forward == "gated-gelu" else 2) * d * config.d_ff
  rows = batch * length
  parts = {PARTS[0]: 2 * layers * rows * mlp, PARTS[1]: 2 * layers * rows * 4 * d * inner,
           PARTS[2]: 2 * layers * batch * 2 * length * length * inner}
  parts[PARTS[3]] = batch * monot5_flops(config, length) - sum(parts.values())
  parts[PARTS[4]] = 0
  return parts


def profile_step(config_name: str, dtype: str, batch: int, length: int, repeats: int
                 ) -> tuple[float, dict[str, float]]:
  """(milliseconds per step on the wall, {part: milliseconds per step}) of one compiled step."""
  import jax
  import numpy as np

  from t5rank.models.config import get_config
  from t5rank.models.monot5 import score_step
  from t5rank.models.network import param_axes
  from t5rank.models.reranker import cast_params
  from t5rank.partitioning import batch_sharding
  from t5rank.ranking.devices import place_params, scoring_mesh
  from t5rank.testing import random_params

  config = get_config(config_name, dropout_rate=0.0, dtype=dtype)
  mesh = scoring_mesh()
  params = place_params(cast_params(random_params(config, 0), dtype), param_axes(config), mesh)
  ids = np.random.default_rng(0).integers(3, config.vocab_size, (batch, length)).astype(np.int32)
  ids[:, -1] = 1  # EOS
  tokens = jax.device_put(ids, batch_sharding(mesh))
  target_ids = (1176, 6136)
  run = lambda: score_step(params, tokens, config=config, target_ids=target_ids)[0].block_until_ready()
  run()
  start = time.perf_counter()
  for _ in range(repeats):
    run()
  wall = (time.perf_counter() - start) / repeats * 1e3
  names = {}
  for line in score_step.lower(params, tokens, config=config,
                               target_ids=target_ids).compile().as_text().splitlines():
    match = re.match(r"\s*%?([\w.\-]+) = .*op_name=\"([^\"]+)\"", line)
    if match:
      names[match.group(1)] = match.group(2)
  with tempfile.TemporaryDirectory() as trace_dir:
    jax.profiler.start_trace(trace_dir)
    for _ in range(repeats):
      run()
    jax.profiler.stop_trace()
    path = sorted(glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"), recursive=True))[-1]
    events = json.load(gzip.open(path))["traceEvents"]
  busy = collections.Counter()
  for event in events:  # the compiled program's operations: the names its text gives them
    if event.get("ph") == "X" and event.get("name") in names:
      busy[part_of(names[event["name"]])] += event["dur"] / 1e3
  devices = mesh.devices.size
  return wall, {part: busy[part] / repeats / devices for part in PARTS}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog=__doc__.split("\n\n", 2)[2])
  parser.add_argument("--config", default="t5_small", help="model config (t5rank.models.config)")
  parser.add_argument("--batch", type=int, default=16, help="inputs per step")
  parser.add_argument("--length", type=int, default=256, help="ids per input")
  parser.add_argument("--repeats", type=int, default=5, help="profiled steps per dtype")
  parser.add_argument("--dtype", choices=("float32", "bfloat16", "both"), default="both")
  parser.add_argument("--write", action="store_true", help="put the tables into BENCHMARKS.md")
  args = parser.parse_args()

  from t5rank.ranking.devices import use_cpu_devices
  use_cpu_devices(None)
  from t5rank.benchmarking import machine, matmul_peak
  from t5rank.models.config import get_config

  dtypes = ("float32", "bfloat16") if args.dtype == "both" else (args.dtype,)
  flops = part_flops(get_config(args.config), args.batch, args.length)
  peak = matmul_peak()
  lines = [
      SECTION, "",
      f"`{' '.join(['python', 'benchmarks/step_profile.py', *sys.argv[1:]])}`, "
      f"{datetime.date.today()}, {machine()}: monoT5's scoring step ({args.config}, random "
      f"weights) on {args.batch} x {args.length} ids, as `t5rank score` places it on this CPU, "
      f"{args.repeats} steps under jax's profiler; each part's time is its operations' busy time "
      "per device (the devices run side by side), its rate its FLOPs over that time, against the "
      "machine's product rate (one 2048 x 2048 product, the same run).", ""]
  for dtype in dtypes:
    wall, parts = profile_step(args.config, dtype, args.batch, args.length, args.repeats)
    total_flops = sum(flops.values())
    lines += [f"{dtype}: {wall:.0f} ms per step on the wall, {total_flops / 1e9:.1f} GFLOP, "
              f"{total_flops / wall / 1e6:.0f} GFLOP/s ({total_flops / wall / 1e6 / (peak[dtype] / 1e9):.0%} "
              f"of the product rate, {peak[dtype] / 1e9:.0f} GFLOP/s)", "",
              "| part | ms per step | share | GFLOP | GFLOP/s | of the product rate |",
              "| --- | --- | --- | --- | --- | --- |"]
    measured = sum(parts.values())
    for part in PARTS:
      ms, gflop = parts[part], flops[part] / 1e9
      rate = f"{gflop / ms * 1e3:.0f}" if gflop and ms else ""
      share = f"{gflop / ms * 1e12 / peak[dtype]:.0%}" if gflop and ms else ""
      lines.append(f"| {part} | {ms:.1f} | {ms / measured:.0%} | {gflop:.1f} | {rate} | {share} |")
    lines.append("")
  print("\n".join(lines))
  if args.write:
    from t5rank.benchmarking import write_section
    write_section(BENCHMARKS, "\n".join(lines))


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  main()
