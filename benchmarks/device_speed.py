"""monoT5's scoring step on one fixed shape, float32 against bfloat16: the accelerator's own rate.

    python benchmarks/device_speed.py --models t5_base --batch 128 --length 256

Random weights (std .05) and random token ids (one batch of `--batch` rows of `--length` ids, no
padding, as the scorer's full batches of one length bucket are). For each model and dtype the step
(`t5rank.models.monot5.score_step`, what `t5rank score` runs per batch;
`t5rank.benchmarking.score_step_rate`) is compiled once, then run
`--repeats` times back to back; pairs/s and tokens/s are of the timed calls alone, and the encoder
TFLOP/s count 2 x the encoder's parameters (embedding excluded) x tokens (a lower bound: attention's
own products and the one decoder step are left out). `max |d log P|` is the largest difference of a row's log P(true) in bfloat16 from float32
(same weights, same ids). Compilation, host input and transfers are not in the rates: HISTORY.md
"Scorer speed" has the whole-pipeline figures.

    python benchmarks/device_speed.py --train --models t5_base --batch 128 --length 512

`--train` times the trainer's own step instead (`t5rank.training.trainer.make_trainer` with the
monoT5/duoT5 loss of `t5rank.training.seq2seq`, Adafactor at 1e-3, dropout 0.1: the paper recipe's
step, as `t5rank train` runs it): one batch of `--length` input ids and a 2-token target per row,
parameters in float32 and activations in the named dtype (as the gins' `config.get_config.dtype`).
Examples/s and tokens/s are of the timed steps on that one batch already on the device (no data
pipeline); TFLOP/s count 6 x the encoder's matrices x input tokens (forward and backward, a lower
bound); `|d loss|` is the first step's loss in bfloat16 against float32 (T5-like random weights; on
a GPU "float32" computes its products in TF32, JAX's default there). A dtype that runs out of device
memory gets a row that says so.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from t5rank.benchmarking import score_step_rate
from t5rank.models.config import get_config
from t5rank.testing import random_params


def measure_training(name: str, batch: int, length: int, repeats: int,
                     dtypes: tuple[str, ...] = ("float32", "bfloat16")) -> list[dict]:
  """One row per dtype: the trainer's step (module docstring) compiled, then timed `repeats`
  times on one batch on the device. A dtype whose step does not fit the device's memory gets a row
  with `error` and the next dtype is still measured."""
  from t5rank import partitioning
  from t5rank.training import trainer
  from t5rank.training.seq2seq import Seq2Seq

  rng = np.random.default_rng(0)
  ids = rng.integers(3, 32000, (batch, length)).astype(np.int32)
  ids[:, -1] = 1  # EOS
  words = rng.choice([1176, 6136], batch).astype(np.int32)  # "true" / "false"
  host = {"encoder_input_tokens": ids,
          "decoder_input_tokens": np.stack([np.zeros_like(words), words], 1),
          "decoder_target_tokens": np.stack([words, np.ones_like(words)], 1),
          "decoder_loss_weights": np.ones((batch, 2), np.int32)}
  mesh = partitioning.create_mesh((-1, 1))
  rows, losses = [], {}
  for dtype in dtypes:
    config = get_config(name, dropout_rate=0.1, dtype=dtype)
    row = {"model": name, "params": f"{config.num_parameters / 1e6:.0f}M", "dtype": dtype,
           "shape": f"{batch} x {length}"}
    run = trainer.make_trainer(Seq2Seq(config), mesh, optimizer=trainer.adafactor(1e-3),
                               schedule=trainer.learning_rate_fn(1e-3))
    try:
      state = run.init_fn(random_params(config))  # T5-like scales: a loss that means something
      inputs = jax.device_put(host, partitioning.batch_sharding(mesh))
      start = time.perf_counter()
      state, metrics = run.step_fn(state, inputs)
      losses[dtype] = float(jax.block_until_ready(metrics["loss"]))
      compile_s = time.perf_counter() - start
      start = time.perf_counter()
      for _ in range(repeats):
        state, metrics = run.step_fn(state, inputs)
      jax.block_until_ready(metrics["loss"])
    except jax.errors.JaxRuntimeError as e:
      if "RESOURCE_EXHAUSTED" not in str(e):
        raise
      rows.append(dict(row, error="out of memory: " + str(e).splitlines()[0][:200]))
      print(rows[-1], flush=True)
      continue
    seconds = (time.perf_counter() - start) / repeats
    encoder = sum(x.size for x in jax.tree.leaves(state["params"]["encoder"]))
    rows.append(dict(row, compile=compile_s, ms=seconds * 1e3, rate=batch / seconds,
                     tokens=batch * length / seconds, loss=losses[dtype],
                     tflops=6 * encoder * batch * length / seconds / 1e12))
    print(rows[-1], flush=True)
    del state
  if len(losses) == 2:
    rows[-1]["difference"] = abs(losses["bfloat16"] - losses["float32"])
  return rows


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--models", default="t5_base")
  parser.add_argument("--batch", type=int, default=128, help="rows per step")
  parser.add_argument("--length", type=int, default=256, help="ids per row")
  parser.add_argument("--repeats", type=int, default=20, help="timed steps per model and dtype")
  parser.add_argument("--train", action="store_true",
                      help="time the training step (loss, gradients, Adafactor) instead of scoring")
  args = parser.parse_args()
  if min(args.batch, args.length, args.repeats) < 1:
    parser.error("--batch, --length and --repeats must be at least 1")
  print(f"jax {jax.__version__}, {jax.devices()[0].device_kind} ({jax.devices()[0].platform})")
  rate, difference = (("examples/s", "\\|d loss\\|") if args.train
                      else ("pairs/s", "max \\|d log P\\|"))
  print(f"| model | dtype | batch | compile | ms per step | {rate} | tokens/s | encoder TFLOP/s | "
        f"{difference} |")
  print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
  lines = []
  for name in args.models.split(","):
    how = measure_training if args.train else score_step_rate
    rows = how(name, args.batch, args.length, args.repeats)
    for r in rows:
      what = f"| {r['model']} ({r['params']}) | {r['dtype']} | {r['shape']} | "
      if "error" in r:
        lines.append(what + f"{r['error']} | | | | | |")
        continue
      difference = f"{r['difference']:.2g}" if "difference" in r else ""
      lines.append(what + f"{r['compile']:.1f} s | {r['ms']:.1f} | {r['rate']:.0f} | "
                   f"{r['tokens']:.0f} | {r['tflops']:.1f} | {difference} |")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
