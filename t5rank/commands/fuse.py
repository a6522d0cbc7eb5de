"""`t5rank fuse`: a hybrid of two or more runs by score interpolation; the method is in `t5rank.ranking.fusion`."""

from __future__ import annotations

import argparse
import math

from t5rank.commands import add_overwrite
from t5rank.ranking import fusion
from t5rank.ranking.fusion import NORMALIZATIONS, interpolate_runs, tune_weight, tune_weights


# --------------------------------------------------------------------------------------- the CLI


def _weight(text: str) -> float:
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
  if not 0.0 <= value <= 1.0:
    raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
  return value


def _weights(text: str) -> list[float]:
  try:
    values = [float(v) for v in text.split(",")]
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
  if any(v < 0 for v in values) or not math.isclose(sum(values), 1.0, abs_tol=1e-6):
    raise argparse.ArgumentTypeError(f"expected weights >= 0 summing to 1, got {text!r}")
  total = sum(values)  # 0.333333,0.333333,0.333334 and the like, made to sum to 1 exactly
  return [v / total for v in values]


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("fuse", help="interpolate two or more runs' scores (e.g. BM25 and "
                                         "monoT5)",
                            description=fusion.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("runs", nargs="+", metavar="RUN",
                 help="two or more runs (TREC format) over the same candidates, e.g. BM25's top k "
                      "and monoT5's reranking of it")
  how = p.add_mutually_exclusive_group(required=True)
  how.add_argument("--weight", type=_weight, help="with two runs: w in [0, 1], the second run's share")
  how.add_argument("--weights", type=_weights, metavar="W1,W2,...",
                   help="one weight per run, >= 0, summing to 1 (to within 1e-6)")
  how.add_argument("--tune", nargs="+", metavar=("QRELS", "RUN"),
                   help="choose the weights on these held-out qrels and one held-out run per RUN, "
                        "in the same order; give it after the runs (two runs: w on the grid 0, 0.05, "
                        "..., 1; n runs: every weighting in steps of .05)")
  p.add_argument("--metric", default="MRR", help="what --tune maximizes (default: MRR)")
  p.add_argument("--normalization", choices=NORMALIZATIONS, default="zscore",
                 help="per-query rescaling of each run's scores (default: zscore)")
  p.add_argument("--union", action="store_true",
                 help="fuse runs of different candidates (two first stages): a candidate missing "
                      "from one run takes that run's lowest score of the query")
  p.add_argument("-o", "--output", required=True, help="the fused TREC run to write")
  p.add_argument("--tag", default="fused", help="run tag (default: fused)")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`."""
  from t5rank.files import Output

  return ([Output("-o", args.output)],
          {**{f"RUN {i + 1}": path for i, path in enumerate(args.runs)},
           **{f"--tune {'QRELS' if i == 0 else f'RUN {i}'}": path
              for i, path in enumerate(args.tune or ())}})


def run(args: argparse.Namespace) -> int:
  from t5rank.evaluation.metrics import parse_metric
  from t5rank.data.readers import check_finite_run, read_qrels, read_run, write_run

  n = len(args.runs)
  if n < 2:
    raise SystemExit("t5rank fuse: give two or more runs to fuse")
  if args.weight is not None and n != 2:
    raise SystemExit(f"t5rank fuse: --weight is the second of two runs' share; with {n} runs give "
                     "--weights W1,...,Wn")
  if args.weights is not None and len(args.weights) != n:
    raise SystemExit(f"t5rank fuse: --weights has {len(args.weights)} weights for {n} runs")
  if args.tune is not None and len(args.tune) != n + 1:
    raise SystemExit(f"t5rank fuse: --tune takes the qrels and {n} held-out runs (one per run), "
                     f"got {len(args.tune)} paths")

  def run_file(path: str):
    run = read_run(path)
    check_finite_run(run, path)
    return run

  try:
    parse_metric(args.metric)
    runs = [run_file(path) for path in args.runs]
    if args.weight is not None:
      weights = [1.0 - args.weight, args.weight]
    elif args.weights is not None:
      weights = args.weights
    elif n == 2:
      qrels, tune_first, tune_second = args.tune
      weight, values = tune_weight(read_qrels(qrels), run_file(tune_first), run_file(tune_second),
                                   metric=args.metric, normalization=args.normalization,
                                   union=args.union)
      print("tuned on held-out queries: "
            + "  ".join(f"w={w:g}:{v:.4f}" for w, v in values.items()))
      weights = [1.0 - weight, weight]
    else:
      best, values = tune_weights(read_qrels(args.tune[0]), [run_file(p) for p in args.tune[1:]],
                                  metric=args.metric, normalization=args.normalization,
                                  union=args.union)
      top = sorted(values.items(), key=lambda item: -item[1])[:5]
      print(f"tuned on held-out queries ({len(values)} weightings), the best: "
            + "  ".join(f"{','.join(f'{w:g}' for w in g)}:{v:.4f}" for g, v in top))
      weights = list(best)
    fused = interpolate_runs(runs, weights, normalization=args.normalization, union=args.union)
  except ValueError as e:  # malformed files (with file:line), non-finite scores, other candidates
    raise SystemExit(f"t5rank fuse: {e}") from None
  write_run(args.output, fused, tag=args.tag)
  shown = f"w = {weights[1]:g}" if n == 2 else "weights " + ",".join(f"{w:g}" for w in weights)
  print(f"wrote {args.output} ({shown}, {args.normalization})")
  return 0
