"""benchmarks/device_check.py, the check a lent GPU runs first, runs on this CPU with tiny shapes:
every section completes and reports what it measured (on a CPU every precision gives the CPU's
float32 scores, so the differences are exact zeros)."""

import os
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
  for section in ("peak", "precision", "TK", "cache", "step", "end to end"):
    assert (section, "section seconds") in measures, section
  assert measures["precision", "tiny float32 products: max |d log P| vs CPU"] == "0"
  assert measures["precision", "t5rank score monoT5 float32: max |d log P| vs CPU run"] == "0"
  assert measures["TK", "TK's buckets (32 words): max |d s| vs CPU run"] == "0"
  first = [v for (s, m), v in measures.items() if s == "cache" and m.startswith("first")]
  second = [r for r in rows if r[0].lstrip("| ") == "cache" and r[1].startswith("second")]
  assert first and second and "0 compiled" in second[0][3]  # the second run compiled nothing
