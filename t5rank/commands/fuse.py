"""`t5rank fuse`: a hybrid of two runs by score interpolation; the method is in `t5rank.ranking.fusion`."""

from __future__ import annotations

import argparse

from t5rank.commands import refuse_overwriting_inputs
from t5rank.ranking import fusion
from t5rank.ranking.fusion import NORMALIZATIONS, interpolate, tune_weight


# --------------------------------------------------------------------------------------- the CLI


def _weight(text: str) -> float:
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
  if not 0.0 <= value <= 1.0:
    raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
  return value


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("fuse", help="interpolate two runs' scores (e.g. BM25 and monoT5)",
                            description=fusion.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("first", help="the first run (TREC format), e.g. BM25's top k")
  p.add_argument("second", help="the second run over the same candidates, e.g. monoT5's")
  how = p.add_mutually_exclusive_group(required=True)
  how.add_argument("--weight", type=_weight, help="w in [0, 1]: the second run's share")
  how.add_argument("--tune", nargs=3, metavar=("QRELS", "FIRST", "SECOND"),
                   help="choose w on these held-out qrels and runs (the grid 0, 0.05, ..., 1)")
  p.add_argument("--metric", default="MRR", help="what --tune maximizes (default: MRR)")
  p.add_argument("--normalization", choices=NORMALIZATIONS, default="zscore",
                 help="per-query rescaling of each run's scores (default: zscore)")
  p.add_argument("--union", action="store_true",
                 help="fuse runs of different candidates (two first stages): a candidate missing "
                      "from one run takes that run's lowest score of the query")
  p.add_argument("-o", "--output", required=True, help="the fused TREC run to write")
  p.add_argument("--tag", default="fused", help="run tag (default: fused)")
  p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
  from t5rank.evaluation.metrics import parse_metric
  from t5rank.data.readers import check_finite_run, read_qrels, read_run, write_run

  refuse_overwriting_inputs("fuse", {"-o": args.output}, {
      "FIRST_RUN": args.first, "SECOND_RUN": args.second,
      **({f"--tune {name}": path for name, path in zip(("QRELS", "FIRST", "SECOND"), args.tune)}
         if args.tune else {})})

  def run_file(path: str):
    run = read_run(path)
    check_finite_run(run, path)
    return run

  try:
    parse_metric(args.metric)
    weight = args.weight
    if args.tune:
      qrels, tune_first, tune_second = args.tune
      weight, values = tune_weight(read_qrels(qrels), run_file(tune_first), run_file(tune_second),
                                   metric=args.metric, normalization=args.normalization,
                                   union=args.union)
      print("tuned on held-out queries: "
            + "  ".join(f"w={w:g}:{v:.4f}" for w, v in values.items()))
    fused = interpolate(run_file(args.first), run_file(args.second), weight,
                        normalization=args.normalization, union=args.union)
  except ValueError as e:  # malformed files (with file:line), non-finite scores, other candidates
    raise SystemExit(f"t5rank fuse: {e}") from None
  write_run(args.output, fused, tag=args.tag)
  print(f"wrote {args.output} (w = {weight:g}, {args.normalization})")
  return 0
