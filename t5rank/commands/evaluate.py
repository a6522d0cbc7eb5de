"""`t5rank evaluate`: metrics of TREC runs and paired t-tests; the semantics are in `t5rank.evaluation.metrics`."""

from __future__ import annotations

import argparse
import json
import os
from typing import Sequence

from t5rank.evaluation import metrics
from t5rank.evaluation.metrics import DEFAULT_ALPHA, DEFAULT_METRICS, evaluate, format_table, parse_metric


def _run_names(paths: Sequence[str]) -> list[str]:
  """File names, or the paths where two runs share a file name."""
  names = [os.path.basename(p) for p in paths]
  return names if len(set(names)) == len(names) else list(paths)


def _metric_list(text: str) -> list[str]:
  names = [name.strip() for name in text.split(",") if name.strip()]
  try:
    for name in names:
      parse_metric(name)
  except ValueError as e:
    raise argparse.ArgumentTypeError(str(e)) from None
  return names


def add_parser(subparsers) -> None:
  p = subparsers.add_parser(
      "evaluate", help="metrics of TREC runs and paired t-tests against the first run",
      description=metrics.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--qrels", required=True, help="TREC qrels (qid 0 docid relevance)")
  p.add_argument("runs", nargs="+", metavar="RUN", help="TREC runs; the first is the baseline")
  p.add_argument("--metrics", type=_metric_list, default=list(DEFAULT_METRICS),
                 metavar="M1,M2,...",
                 help=f"comma-separated metrics (default: {','.join(DEFAULT_METRICS)})")
  p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                 help=f"significance level after correction (default {DEFAULT_ALPHA})")
  p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
  p.add_argument("--xpr", metavar="XPR_JSON",
                 help="the xpr.json of `t5rank xpr`: also break each run down by query language "
                      "and relevant-answer language, and measure its preference for candidates in "
                      "the query's language (t5rank.evaluation.languages)")
  p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
  from t5rank.data.readers import check_finite_run, read_qrels, read_run

  try:
    qrels = read_qrels(args.qrels)
    runs = {name: read_run(path) for name, path in zip(_run_names(args.runs), args.runs)}
    for path, run in zip(args.runs, runs.values()):
      check_finite_run(run, path)
    report = evaluate(qrels, runs, args.metrics, args.alpha)
    breakdowns = {}
    if args.xpr:
      from t5rank.data.xpr import read_xpr_languages
      from t5rank.evaluation import languages

      query_language = read_xpr_languages(args.xpr)
      missing = [q for q in qrels if q not in query_language]
      if missing:
        raise ValueError(f"{args.xpr} has no language for {len(missing)} qrels queries, e.g. "
                         f"{missing[0]!r}: give the xpr.json of the same construction")
      for name, run in runs.items():
        breakdowns[name] = {"rows": languages.language_breakdown(qrels, run, query_language),
                            "preference": languages.language_preference(qrels, run, query_language)}
  except ValueError as e:  # malformed files (with file:line), non-finite scores
    raise SystemExit(f"t5rank evaluate: {e}") from None
  if args.json:
    print(json.dumps(dict(report, languages=breakdowns) if breakdowns else report, indent=1))
    return 0
  print(format_table(report))
  for name, b in breakdowns.items():
    print()
    print(languages.format_breakdown(name, b["rows"], b["preference"], 10))
  return 0
