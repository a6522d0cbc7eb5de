"""A cascade's report (`t5rank rerank`, `t5rank demo`): the table of `t5rank.evaluation.cascade`'s
evaluation with each stage's time and pairs/s (`format_report`), and its chart (`plot_cascade`)."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from t5rank.evaluation.metrics import untested
from t5rank.files import atomic_write


def _significant(p: Optional[float]) -> bool:
  """Whether a corrected p (None or nan: a test that could not be made) is below .01."""
  return not untested(p) and p < 0.01


def format_report(report: dict, stage_info: Sequence[Mapping]) -> str:
  """The cascade's table: each stage's metrics (* p < .01 against the first stage, † against the
  ranking the stage reranked, Bonferroni) and its time and pairs/s."""
  metrics = report["metrics"]
  lines = [f"| stage | {' | '.join(metrics)} | time | pairs/s |",
           "| --- |" + " --- |" * (len(metrics) + 2)]
  for row, info in zip(report["stages"], stage_info):
    cells = []
    for k in metrics:
      mark = ""
      if _significant(row.get("vs_first", {}).get(k, {}).get("p_bonferroni")):
        mark += "*"
      if _significant(row.get("vs_previous", {}).get(k, {}).get("p_bonferroni")):
        mark += "†"
      cells.append(f"{row['mean'][k]:.4f}{mark}")
    speed = info.get("pairs_per_second")
    lines.append(f"| {row['name']} | {' | '.join(cells)} | {info.get('seconds', 0.0):.1f} s | "
                 f"{f'{speed:.0f}' if speed else ('reused' if info.get('reused') else '')} |")
  lines.append(f"\n{report['queries']} queries; * p < 0.01 against the first stage, † against the "
               f"ranking the stage reranked (paired t-tests, Bonferroni over "
               f"{report['comparisons']} comparisons).")
  return "\n".join(lines)


def plot_cascade(report: dict, path: str, title: str, metric: str = "MRR") -> None:
  """A PNG of `t5rank.evaluation.cascade.evaluate_stages`' report (atomically, Agg): each row's
  mean `metric` as a bar, and beside it the difference against the first stage and against the
  ranking the row's stage reranked, each with its Bonferroni-corrected p-value (the sign says the
  direction)."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  rows = report["stages"]
  fig = Figure(figsize=(10, 0.55 * len(rows) + 1.6), dpi=120)
  FigureCanvasAgg(fig)
  ax = fig.add_subplot()
  names = [r["name"] for r in rows][::-1]
  values = [r["mean"][metric] for r in rows][::-1]
  ax.barh(names, values, color=["#4c72b0" if "+fusion" not in n else "#dd8452" for n in names])
  means = {r["name"]: r["mean"][metric] for r in rows}
  for y, row in enumerate(rows[::-1]):
    text = f"{row['mean'][metric]:.4f}"
    for label, key, base in (("vs " + rows[0]["name"], "vs_first", rows[0]["name"]),
                             (f"vs {row.get('previous')}", "vs_previous", row.get("previous"))):
      if key in row:
        base = means[base]
        delta = row["mean"][metric] - base
        p = row[key][metric]["p_bonferroni"]
        text += f"   {label}: {delta:+.4f} (p {'n/a' if untested(p) else format(p, '.2g')})"
    ax.text(row["mean"][metric] + 0.005, y, text, va="center", fontsize=8)
  ax.set_xlim(0, min(1.0, 2.2 * max(values) + 0.05))
  ax.set_xlabel(f"{metric} ({report['queries']} queries; p: paired t-test, Bonferroni over "
                f"{report['comparisons']} comparisons)")
  ax.set_title(title, fontsize=9)
  from matplotlib.patches import Patch

  ax.legend(handles=[Patch(color="#4c72b0", label="a stage's own ranking"),
                     Patch(color="#dd8452", label="fused with the stages before it")],
            loc="upper center", bbox_to_anchor=(0.5, -0.24), ncols=2, fontsize=8, frameon=False)
  fig.tight_layout()
  with atomic_write(path, "wb") as f:  # tight: the annotations past the axes are in the image
    fig.savefig(f, format="png", bbox_inches="tight")
