"""A cascade's rows evaluated (`t5rank rerank --qrels`, `t5rank.pipelines.cascade`): each row's
mean metrics and two-sided paired t-tests against the first stage and against the ranking its
stage reranked, Bonferroni-corrected over all those comparisons (`t5rank.evaluation.metrics`'
per-query values and tests). `t5rank.pipelines.cascade_report` tabulates and charts it."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from t5rank.data.readers import Run
from t5rank.evaluation.metrics import bonferroni, paired_t_test, per_query, relevant_queries

METRICS = ("MRR", "MRR@10", "P@1", "nDCG@10", "MAP")


def evaluate_stages(qrels: Mapping[str, Mapping[str, int]], names: Sequence[str],
                    runs: Sequence[Run], metrics: Sequence[str] = METRICS,
                    inputs: Optional[Sequence[Optional[int]]] = None) -> dict:
  """Each row's mean metrics, and two-sided paired t-tests against the first stage and against
  the ranking the row's stage reranked (`inputs[i]`, a row index; default the row before; a
  stage's fusion row has its stage's input), Bonferroni-corrected over all those comparisons
  (every metric counts once per compared pair of runs)."""
  values = [per_query(qrels, run, list(metrics)) for run in runs]
  inputs = list(inputs) if inputs is not None else [None, *range(len(runs) - 1)]
  comparisons = [(i, 0) for i in range(1, len(runs))] + [
      (i, j) for i, j in enumerate(inputs) if j is not None and j > 0]
  m = max(1, len(comparisons))
  rows = []
  for i, name in enumerate(names):
    row = {"name": name, "mean": {k: float(values[i][k].mean()) for k in metrics}}
    for label, j in (("vs_first", 0), ("vs_previous", inputs[i])):
      if (i, j) in comparisons and (label == "vs_first" or j > 0):
        row[label] = {}
        if label == "vs_previous":
          row["previous"] = names[j]
        for k in metrics:
          t, p = paired_t_test(values[i][k], values[j][k])
          row[label][k] = {"t": t, "p": p, "p_bonferroni": bonferroni(p, m)}
    rows.append(row)
  return {"metrics": list(metrics), "queries": len(relevant_queries(qrels)),
          "comparisons": m, "stages": rows}
