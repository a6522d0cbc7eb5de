"""Score interpolation of two runs (t5rank.ranking.fusion), with values worked out by hand."""
import math
import subprocess
import sys

import numpy as np
import pytest

from t5rank.ranking import fusion
from t5rank.data.readers import read_run, write_run


def test_normalize_by_hand():
  # mean 2, population std sqrt(2/3)
  np.testing.assert_allclose(fusion.normalize([1.0, 2.0, 3.0]),
                             [-math.sqrt(1.5), 0.0, math.sqrt(1.5)])
  np.testing.assert_allclose(fusion.normalize([1.0, 2.0, 5.0], "minmax"), [0.0, 0.25, 1.0])
  np.testing.assert_array_equal(fusion.normalize([4.0, 4.0]), [0.0, 0.0])
  np.testing.assert_array_equal(fusion.normalize([4.0, 4.0], "minmax"), [0.0, 0.0])
  with pytest.raises(ValueError, match="unknown normalization"):
    fusion.normalize([1.0], "rank")


# BM25 prefers a > b > c; monoT5 prefers c > b > a (log P(true) values).
FIRST = {"q1": [("a", 9.0), ("b", 6.0), ("c", 3.0)]}
SECOND = {"q1": [("c", -0.1), ("b", -1.1), ("a", -2.1)]}


def test_interpolate_endpoints_and_middle():
  assert [d for d, _ in fusion.interpolate(FIRST, SECOND, 0.0)["q1"]] == ["a", "b", "c"]
  assert [d for d, _ in fusion.interpolate(FIRST, SECOND, 1.0)["q1"]] == ["c", "b", "a"]
  # Both runs are evenly spaced, so z-scores are (+-sqrt(1.5), 0) mirrored: at w = 0.5 all cancel.
  middle = dict(fusion.interpolate(FIRST, SECOND, 0.5)["q1"])
  np.testing.assert_allclose([middle[d] for d in "abc"], [0.0, 0.0, 0.0], atol=1e-12)
  # w = 0.25 (minmax): a = 0.75 * 1 + 0.25 * 0 = 0.75, b = 0.5, c = 0.25
  quarter = fusion.interpolate(FIRST, SECOND, 0.25, normalization="minmax")["q1"]
  assert quarter == [("a", 0.75), ("b", 0.5), ("c", 0.25)]


def test_interpolate_refuses_different_candidates():
  with pytest.raises(ValueError, match="different candidates"):
    fusion.interpolate(FIRST, {"q1": [("a", 1.0), ("b", 0.0)]}, 0.5)
  with pytest.raises(ValueError, match="different queries"):
    fusion.interpolate(FIRST, {"q2": SECOND["q1"]}, 0.5)
  with pytest.raises(ValueError, match="weight"):
    fusion.interpolate(FIRST, SECOND, 1.5)


# An uneven second run, so that no grid weight falls on a tie. z-scores: FIRST a 1.2247, b 0,
# c -1.2247; UNEVEN c 0.8890, b 0.5080, a -1.3970. Fused (1 - w) FIRST + w UNEVEN orders
# a, b, c for w < 0.391; b, a, c up to 0.517; b, c, a up to 0.763; c, b, a above.
UNEVEN = {"q1": [("c", 0.0), ("b", -0.5), ("a", -3.0)]}


def test_tune_weight_picks_the_best_and_the_smaller_on_ties():
  grid = [0.0, 0.25, 0.5, 0.75, 1.0]
  best, values = fusion.tune_weight({"q1": {"c": 1}}, FIRST, UNEVEN, grid=grid)
  assert values == pytest.approx({0.0: 1 / 3, 0.25: 1 / 3, 0.5: 1 / 3, 0.75: 1 / 2, 1.0: 1.0})
  assert best == 1.0
  best, values = fusion.tune_weight({"q1": {"a": 1}}, FIRST, UNEVEN, grid=grid)
  assert values == pytest.approx({0.0: 1.0, 0.25: 1.0, 0.5: 1 / 2, 0.75: 1 / 3, 1.0: 1 / 3})
  assert best == 0.0  # tied with 0.25: the smaller weight


def test_fuse_command_tunes_on_held_out_runs(tmp_path):
  for name, run in (("first.run", FIRST), ("second.run", UNEVEN)):
    write_run(str(tmp_path / name), run, tag="x")
  (tmp_path / "qrels.txt").write_text("q1 0 c 1\n")
  out = tmp_path / "fused.run"
  result = subprocess.run(
      [sys.executable, "-m", "t5rank.cli", "fuse", str(tmp_path / "first.run"),
       str(tmp_path / "second.run"), "--tune", str(tmp_path / "qrels.txt"),
       str(tmp_path / "first.run"), str(tmp_path / "second.run"), "-o", str(out)],
      capture_output=True, text=True, check=True)
  assert "w = 0.8" in result.stdout  # the smallest grid weight above 0.763
  assert [d for d, _ in read_run(str(out))["q1"]] == ["c", "b", "a"]
  bad = subprocess.run([sys.executable, "-m", "t5rank.cli", "fuse", "a", "b", "--weight", "2",
                        "-o", str(out)], capture_output=True, text=True)
  assert bad.returncode == 2 and "expected a number in [0, 1]" in bad.stderr
