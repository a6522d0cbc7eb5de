"""Plots scalars of a `t5rank train` run (its TensorBoard events in MODEL_DIR/train) against the step.

    .venv/bin/python scripts/plot_training_curve.py runs/pretrain_tiny \
        --tags loss,token_accuracy --output benchmarks/figures/pretrain_tiny_loss.png

One panel per tag; prints each tag's first and last values.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys


def read_scalars(logdir: str, tag: str) -> dict[int, float]:
  """{step: value} of one scalar from the event files under `logdir`."""
  import tensorflow as tf

  values = {}
  for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == tag:
          values[event.step] = float(tf.make_ndarray(value.tensor))
  return values


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("model_dir")
  parser.add_argument("--tags", default="loss",
                      help="comma-separated scalar names of MODEL_DIR/train (default: loss)")
  parser.add_argument("--output", required=True, help="PNG path")
  parser.add_argument("--title", default=None)
  args = parser.parse_args(argv)

  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  tags = args.tags.split(",")
  series = {tag: read_scalars(os.path.join(args.model_dir, "train"), tag) for tag in tags}
  missing = [t for t, s in series.items() if not s]
  if missing:
    raise SystemExit(f"no values of {missing} in {args.model_dir}/train")
  fig = Figure(figsize=(4 * len(tags), 3.2), dpi=120)
  FigureCanvasAgg(fig)
  for i, tag in enumerate(tags, 1):
    steps = sorted(series[tag])
    ax = fig.add_subplot(1, len(tags), i)
    ax.plot(steps, [series[tag][s] for s in steps], marker=".")
    ax.set_xlabel("step")
    ax.set_title(tag, fontsize=9)
    ax.grid(alpha=0.3)
    print(f"{tag}: step {steps[0]} {series[tag][steps[0]]:.4f} -> step {steps[-1]} "
          f"{series[tag][steps[-1]]:.4f}")
  if args.title:
    fig.suptitle(args.title, fontsize=9)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  fig.savefig(args.output)
  print(f"wrote {args.output}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
