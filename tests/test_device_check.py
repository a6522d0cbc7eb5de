"""benchmarks/device_check.py, the check a lent GPU runs first, runs on this CPU with tiny shapes:
every section completes and reports what it measured (on a CPU the device is the CPU, so the scores
are the CPU's own: exact zeros; the demo's cascade gives the CPU's MRR in every row), and a second
run compiles nothing."""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_device_check_runs_every_section_on_a_cpu(tmp_path):
  table = tmp_path / "table.md"
  done = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "device_check.py"),
                         "tiny", "--out", str(tmp_path / "check"), "--table", str(table)],
                        capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-2000:]
  rows = [line.split(" | ") for line in table.read_text().splitlines()[2:]]
  measures = {(r[0].lstrip("| "), r[1]): r[2] for r in rows}
  assert not [m for m in measures if m[1] == "FAILED"], measures
  for section in ("peak", "precision", "TK", "step", "end to end", "cascade", "T5-base cascade"):
    assert (section, "section seconds") in measures, section
  # the demo's cascade through `t5rank rerank` gives the CPU's reference run (here the same CPU)
  cascade = [r for r in rows if r[0] == "| cascade" and r[1].endswith(" MRR")]
  assert [r[1] for r in cascade] == [f"first run: {name} MRR" for name in (
      "bm25", "dual_encoder", "dual_encoder+fusion", "tk", "tk+fusion", "monot5", "monot5+fusion",
      "rankt5", "rankt5+fusion", "duot5", "duot5+fusion")]
  for row in cascade:
    cpu_mrr, difference = re.search(r"CPU ([0-9.]+); max \|d score\| ([0-9.e+-]+)", row[3]).groups()
    assert float(row[2]) == float(cpu_mrr) and float(difference) == 0, row
  # a stage over the top 10 of the one before, compared where both devices gave it the same 10
  # (RankT5's top 50 holds all 30 candidates of each tiny query: nothing to compare there)
  same = [r for r in rows if r[0] == "| cascade" and ", same top " in r[1]]
  assert [r[1] for r in same] == [
      "first run: duot5, same top 10 of rankt5+fusion on both devices: max |d score|"]
  assert same[0][2] == "0" and same[0][3].rstrip(" |") == "0 of 6 queries' top 10 differ", same
  assert {r[1] for r in rows if r[0] == "| T5-base cascade"} >= {
      "first run: monot5", "first run: duot5"}
  assert measures["precision", "monoT5 float32, first run: max |d log P| vs CPU run"] == "0"
  # one length bucket pads documents longer: the same scores to float32 rounding
  assert float(measures["TK", "one bucket, cached: max |d s| vs CPU run"]) < 1e-6
  second = [r for r in rows if r[1].startswith("monoT5 float32, second run")]
  assert second and " 0 compiled" in second[0][3], second  # all from the cache


def test_a_stage_over_the_top_k_is_compared_where_both_devices_gave_it_the_same_k(tmp_path,
                                                                                 load_benchmark):
  """`same_input_differences`: only the queries whose top K of the ranking before holds the same
  documents on both devices (in any order), and only their top K (below it a stage keeps the
  ranking before, scored by position)."""
  same_input_differences = load_benchmark("device_check").same_input_differences

  from t5rank.data.readers import write_run

  def runs(name, **queries):
    write_run(str(tmp_path / name), {q: list(docs) for q, docs in queries.items()}, tag=name)
    return str(tmp_path / name)

  # the ranking the stage reranked: q1's top 2 the same documents in another order, q2's not
  before_gpu = runs("b_gpu", q1=[("a", 3.0), ("b", 2.0), ("c", 1.0)],
                    q2=[("a", 3.0), ("c", 2.0), ("b", 1.0)])
  before_cpu = runs("b_cpu", q1=[("b", 3.0), ("a", 2.0), ("c", 1.0)],
                    q2=[("a", 3.0), ("b", 2.0), ("c", 1.0)])
  # the stage: q1's top 2 differ by .25 at most, its third by 1 (its place below); q2's by 5
  gpu = runs("gpu", q1=[("a", 0.75), ("b", 0.5), ("c", -1.5)], q2=[("a", 9.0), ("c", 8.0),
                                                                    ("b", 7.0)])
  cpu = runs("cpu", q1=[("a", 0.5), ("b", 0.5), ("c", -0.5)], q2=[("a", 4.0), ("b", 3.0),
                                                                   ("c", 2.0)])
  assert same_input_differences(gpu, cpu, before_gpu, before_cpu, depth=2) == (0.25, ["q2"], 2)
  assert same_input_differences(gpu, cpu, before_gpu, before_cpu, depth=3) is None  # all reranked
