"""monoT5's scoring step on one fixed shape, float32 against bfloat16: the accelerator's own rate.

    python benchmarks/device_speed.py --models t5_base --batch 128 --length 256

Random weights (std .05) and random token ids (one batch of `--batch` rows of `--length` ids, no
padding, as the scorer's full batches of one length bucket are). For each model and dtype the step
(`t5rank.models.monot5.score_step`, what `t5rank score` runs per batch) is compiled once, then run
`--repeats` times back to back; pairs/s and tokens/s are of the timed calls alone, and the encoder
TFLOP/s count 2 x the encoder's parameters (embedding excluded) x tokens (a lower bound: attention's
own products and the one decoder step are left out). `max |d log P|` is the largest difference of a row's log P(true) in bfloat16 from float32
(same weights, same ids). Compilation, host input and transfers are not in the rates: docs/history.md
"Scorer speed" has the whole-pipeline figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import jax  # noqa: E402
import numpy as np  # noqa: E402

from t5rank.models.config import get_config  # noqa: E402
from t5rank.models.monot5 import score_step  # noqa: E402
from t5rank.models.reranker import cast_params  # noqa: E402
from t5rank.testing import random_params  # noqa: E402


def measure(name: str, batch: int, length: int, repeats: int,
            dtypes: tuple[str, ...] = ("float32", "bfloat16")) -> list[dict]:
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
                 "ms": seconds * 1e3, "pairs/s": batch / seconds,
                 "tokens/s": batch * length / seconds,
                 "TFLOP/s": 2 * encoder * batch * length / seconds / 1e12})
    print(rows[-1], flush=True)
  if len(scores) == 2:
    rows[-1]["difference"] = float(np.abs(scores["bfloat16"] - scores["float32"]).max())
  return rows


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--models", default="t5_base")
  parser.add_argument("--batch", type=int, default=128, help="rows per step")
  parser.add_argument("--length", type=int, default=256, help="ids per row")
  parser.add_argument("--repeats", type=int, default=20, help="timed steps per model and dtype")
  args = parser.parse_args()
  print(f"jax {jax.__version__}, {jax.devices()[0].device_kind} ({jax.devices()[0].platform})")
  print("| model | dtype | batch | compile | ms per step | pairs/s | tokens/s | encoder TFLOP/s | "
        "max \\|d log P\\| |")
  print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
  lines = []
  for name in args.models.split(","):
    for r in measure(name, args.batch, args.length, args.repeats):
      difference = f"{r['difference']:.2g}" if "difference" in r else ""
      lines.append(f"| {r['model']} ({r['params']}) | {r['dtype']} | {r['shape']} | "
                   f"{r['compile']:.1f} s | {r['ms']:.1f} | {r['pairs/s']:.0f} | "
                   f"{r['tokens/s']:.0f} | {r['TFLOP/s']:.1f} | {difference} |")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
