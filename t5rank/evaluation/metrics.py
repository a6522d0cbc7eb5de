"""`t5rank evaluate`: ranking metrics of TREC runs against qrels, and paired t-tests between runs.

Metrics are computed by trec_eval's own code (pytrec_eval, through ir-measures), so they follow
trec_eval's semantics: a run is ranked by score (descending; trec_eval keeps scores as C floats, so
scores that round to the same float32 tie), ties by document id (descending), and its rank column is
ignored; a document is relevant when its qrels label is >= 1; nDCG uses the
labels as gains. Names accepted by `--metrics` (k a positive integer):

  MRR, MRR@k   reciprocal rank of the first relevant document (within the top k)
  MAP          average precision
  MAP@k        average precision of the top k, over all the query's relevant documents:
               (1/R) Σ_{j≤k} P@j·rel(j) (trec_eval's map_cut; Gillick et al. 2018's MAP@K)
  P@k          precision at k; P@1 equals acc@1
  nDCG@k       normalized discounted cumulative gain at k (trec_eval's ndcg_cut)
  recall@k     fraction of the relevant documents in the top k
  acc@k        1 when a relevant document is in the top k, else 0 (success@k, hit rate)

Averages are over the queries of the qrels that have at least one relevant document. A query that
a run leaves out scores 0 on every metric (trec_eval -c); queries of a run that qrels do not judge
are ignored. MRR@k is trec_eval's reciprocal rank on the run cut to its top k.

With several runs, each later run is compared with the first (the baseline) by a two-sided paired
t-test over the per-query values (scipy.stats.ttest_rel); with m > 1 compared runs the p-values are
Bonferroni-corrected (multiplied by m, capped at 1). Identical per-query values give p = 1. A test
that cannot be made is reported as such (p "n/a", never significant): with fewer than 2 queries, or
per-query differences that are all the same non-zero value (no variance: t would be infinite, p 0).
"""

from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

import numpy as np

from t5rank.data.readers import Run, check_finite_run

DEFAULT_METRICS = ("MRR@10", "MRR", "MAP", "P@1", "P@20", "nDCG@10", "nDCG@20", "recall@1000",
                   "acc@10")
DEFAULT_ALPHA = 0.01
_METRIC = re.compile(r"^(MRR|MAP|P|nDCG|recall|acc)(?:@([1-9][0-9]*))?$")
_NEEDS_CUTOFF = ("P", "nDCG", "recall", "acc")
_IR_MEASURES_NAME = {"MRR": "RR", "MAP": "AP", "P": "P", "nDCG": "nDCG", "recall": "R",
                     "acc": "Success"}


def parse_metric(name: str) -> tuple[str, int | None]:
  """`"nDCG@10"` -> `("nDCG", 10)`; raises ValueError naming the accepted forms."""
  match = _METRIC.match(name)
  if not match or (match[1] in _NEEDS_CUTOFF and match[2] is None):
    raise ValueError(f"unknown metric {name!r}; expected one of MRR, MRR@k, MAP, MAP@k, P@k, "
                     "nDCG@k, recall@k, acc@k (k a positive integer)")
  return match[1], int(match[2]) if match[2] else None


def relevant_queries(qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
  """The queries averaged over: those with at least one relevant (label >= 1) document, sorted."""
  return sorted(qid for qid, docs in qrels.items() if any(rel >= 1 for rel in docs.values()))


def trec_eval_order(candidates: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
  """Candidates as trec_eval ranks them: score descending, then document id descending, the scores
  compared as trec_eval keeps them, C floats (float32): scores that round to the same float32 tie
  (beyond float32's range, to infinity)."""
  with np.errstate(over="ignore"):
    keys = np.asarray([c[1] for c in candidates], np.float64).astype(np.float32).tolist()
  # decorated with -position: equal (score, id) keep their order, as a stable sort would
  order = sorted(zip(keys, [c[0] for c in candidates], range(0, -len(keys), -1)), reverse=True)
  return [candidates[-i] for _, _, i in order]


def per_query(qrels: Mapping[str, Mapping[str, int]], run: Run,
              metrics: Sequence[str] = DEFAULT_METRICS) -> dict[str, np.ndarray]:
  """metric name -> its value on each query of `relevant_queries(qrels)`, in that order (0 for a
  query missing from `run`)."""
  import ir_measures

  check_finite_run(run)
  qids = relevant_queries(qrels)
  position = {qid: i for i, qid in enumerate(qids)}
  values = {name: np.zeros(len(qids)) for name in metrics}
  # One pytrec_eval call per RR cutoff (on the run cut to that depth), one for everything else.
  groups: dict[int | None, dict] = {}
  for name in metrics:
    base, cutoff = parse_metric(name)
    measure = ir_measures.parse_measure(_IR_MEASURES_NAME[base] if base == "MRR" or cutoff is None
                                        else f"{_IR_MEASURES_NAME[base]}@{cutoff}")
    groups.setdefault(cutoff if base == "MRR" else None, {})[measure] = name
  judged = {qid: dict(qrels[qid]) for qid in qids}
  ordered = {qid: trec_eval_order(candidates) for qid, candidates in run.items()
             if qid in position and candidates}
  for depth, measures in groups.items():
    ranked = {qid: dict(candidates[:depth]) for qid, candidates in ordered.items()}
    for metric in ir_measures.pytrec_eval.iter_calc(list(measures), judged, ranked):
      values[measures[metric.measure]][position[metric.query_id]] = metric.value
  return values


def paired_t_test(values: np.ndarray, baseline: np.ndarray) -> tuple[float, float]:
  """(t, two-sided p) of a paired t-test of `values` against `baseline`. When every per-query
  difference is 0 the runs agree: (0, 1). When the test cannot be made, (nan, nan): fewer than 2
  queries, or differences that are all the same non-zero value (no variance: scipy would give an
  infinite t and p 0, which is no evidence); `untested(p)` tells the two apart from a real p."""
  from scipy import stats

  diff = np.asarray(values, np.float64) - np.asarray(baseline, np.float64)
  if not len(diff):
    return math.nan, math.nan
  # differences that only rounding tells apart (0.7 - 0.6 and 0.6 - 0.5) are equal
  rounding = 1e-9 * max(1.0, float(np.abs(diff).max()))
  if np.abs(diff).max() <= rounding:
    return 0.0, 1.0
  if len(diff) < 2 or np.ptp(diff) <= rounding:
    return math.nan, math.nan
  result = stats.ttest_rel(values, baseline)
  return float(result.statistic), float(result.pvalue)


def untested(p: float | None) -> bool:
  """Whether `p` (of `paired_t_test`, or None as a JSON report holds it) is the mark of a test that
  could not be made."""
  return p is None or math.isnan(p)


def bonferroni(p: float, comparisons: int) -> float:
  """`p` multiplied by the number of comparisons, capped at 1; a test not made stays nan."""
  return p if untested(p) else min(1.0, p * comparisons)


def _no_test_reason(diff_count: int) -> str:
  return ("fewer than 2 queries" if diff_count < 2
          else "the per-query differences are all the same (no variance)")


def evaluate(qrels: Mapping[str, Mapping[str, int]], runs: Mapping[str, Run],
             metrics: Sequence[str] = DEFAULT_METRICS, alpha: float = DEFAULT_ALPHA) -> dict:
  """A JSON-ready report: the mean of each metric for each run (name -> run, the first is the
  baseline) and, for the others, t, p, Bonferroni-corrected p and significance at `alpha`."""
  if not runs:
    raise ValueError("no run to evaluate")
  qids = relevant_queries(qrels)
  if not qids:
    raise ValueError("the qrels hold no relevant document (no label >= 1)")
  tables = {name: per_query(qrels, run, metrics) for name, run in runs.items()}
  baseline = next(iter(tables.values()))
  comparisons = len(runs) - 1
  report = {"queries": len(qids), "metrics": list(metrics), "baseline": next(iter(runs)),
            "alpha": alpha, "comparisons": comparisons, "runs": []}
  for i, (name, table) in enumerate(tables.items()):
    entry = {"name": name, "missing_queries": sum(q not in runs[name] for q in qids),
             "mean": {m: float(table[m].mean()) for m in metrics}}
    if i:
      entry["vs_baseline"] = {}
      for m in metrics:
        t, p = paired_t_test(table[m], baseline[m])
        if untested(p):  # None, not NaN: the report is JSON
          entry["vs_baseline"][m] = {"t": None, "p": None, "p_bonferroni": None,
                                     "significant": False, "no_test": _no_test_reason(len(qids))}
        else:
          p_adjusted = bonferroni(p, comparisons)
          entry["vs_baseline"][m] = {"t": t, "p": p, "p_bonferroni": p_adjusted,
                                     "significant": p_adjusted < alpha}
    report["runs"].append(entry)
  return report


def format_table(report: dict) -> str:
  """The report as a text table: one row of means per run (`*` = significantly different from the
  first run), then one row of corrected p-values per compared run."""
  metrics = report["metrics"]
  width = max(8, *(len(m) + 1 for m in metrics))
  name_width = max(len("run"), *(len(r["name"]) for r in report["runs"])) + 2
  lines = ["run".ljust(name_width) + "".join(m.rjust(width) for m in metrics)]
  for r in report["runs"]:
    cells = []
    for m in metrics:
      mark = "*" if r.get("vs_baseline", {}).get(m, {}).get("significant") else " "
      cells.append(f"{r['mean'][m]:.4f}{mark}".rjust(width))
    lines.append(r["name"].ljust(name_width) + "".join(cells))
  corrected = "Bonferroni-corrected over %d runs" % report["comparisons"] \
      if report["comparisons"] > 1 else "one comparison, no correction"
  footer = [f"{report['queries']} queries (qrels queries with a relevant document; a query missing "
            "from a run scores 0)."]
  if report["comparisons"]:
    lines.append("")
    lines.append(f"p-values vs {report['baseline']} (paired t-test, {corrected}):")
    for r in report["runs"][1:]:
      lines.append(r["name"].ljust(name_width) + "".join(
          _format_p(r["vs_baseline"][m]["p_bonferroni"]).rjust(width) for m in metrics))
    footer.append(f"* p < {report['alpha']} against the first run.")
    reasons = sorted({c["no_test"] for r in report["runs"][1:] for c in r["vs_baseline"].values()
                      if "no_test" in c})
    if reasons:
      footer.append(f"n/a: no t-test can be made ({'; '.join(reasons)}).")
  for r in report["runs"]:
    if r["missing_queries"]:
      footer.append(f"{r['name']}: {r['missing_queries']} queries missing (scored 0).")
  return "\n".join(lines + [""] + footer)


def _format_p(p: float | None) -> str:
  if untested(p):
    return "n/a"
  return "1" if p >= 1.0 else (f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}")
