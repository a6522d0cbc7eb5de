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
  with pytest.raises(ValueError, match=r"weight must be in \[0, 1\], got 1.5"):
    fusion.tune_weight({"q1": {"a": 1}}, FIRST, UNEVEN, grid=[0.5, 1.5])


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


# A third run preferring b: scores b 5, a 1, c 0 (mean 2, population std sqrt(14/3)), so its
# z-scores are b 3/sqrt(14/3) = 1.3887, a -1/sqrt(14/3) = -0.4629, c -2/sqrt(14/3) = -0.9258.
THIRD = {"q1": [("b", 5.0), ("a", 1.0), ("c", 0.0)]}


def test_interpolate_runs_three_by_hand():
  s, t = math.sqrt(1.5), math.sqrt(14 / 3)
  fused = fusion.interpolate_runs([FIRST, SECOND, THIRD], [0.5, 0.25, 0.25])["q1"]
  assert [d for d, _ in fused] == ["b", "a", "c"]
  np.testing.assert_allclose(
      [score for _, score in fused],
      [0.25 * 3 / t,                             # b: 0.5 * 0 + 0.25 * 0 + 0.25 * 1.3887
       0.5 * s - 0.25 * s - 0.25 / t,            # a: 0.3062 - 0.1157 = 0.1905
       -0.5 * s + 0.25 * s - 0.25 * 2 / t])      # c: -0.3062 - 0.2315 = -0.5376
  # Two runs through the n-run code give the two-run formula's floats exactly:
  # (1 - w) * z(first) + w * z(second), written out here over the sorted ids a, b, c.
  for w in (0.0, 0.3, 0.65, 1.0):
    formula = ((1 - w) * fusion.normalize([9.0, 6.0, 3.0]) + w * fusion.normalize([-3.0, -0.5, 0.0]))
    expected = sorted(zip("abc", formula.tolist()), key=lambda c: (-c[1], c[0]))
    assert fusion.interpolate_runs([FIRST, UNEVEN], [1 - w, w])["q1"] == expected
    assert fusion.interpolate(FIRST, UNEVEN, w)["q1"] == expected
  with pytest.raises(ValueError, match="summing to 1"):
    fusion.interpolate_runs([FIRST, SECOND, THIRD], [0.5, 0.5, 0.5])
  with pytest.raises(ValueError, match="summing to 1"):
    fusion.interpolate_runs([FIRST, SECOND, THIRD], [0.5, 0.5])
  with pytest.raises(ValueError, match="at least two runs"):
    fusion.interpolate_runs([FIRST], [1.0])
  with pytest.raises(ValueError, match="different candidates .* in run 3"):
    fusion.interpolate_runs([FIRST, SECOND, {"q1": [("a", 1.0)]}], [0.5, 0.25, 0.25])


def test_simplex_grid():
  assert fusion.simplex_grid(2, 0.25) == [(1.0, 0.0), (0.75, 0.25), (0.5, 0.5), (0.25, 0.75),
                                          (0.0, 1.0)]
  grid = fusion.simplex_grid(3)
  assert len(grid) == 231 and len(fusion.simplex_grid(4)) == 1771  # C(22, 2), C(23, 3)
  assert grid[:3] == [(1.0, 0.0, 0.0), (0.95, 0.05, 0.0), (0.95, 0.0, 0.05)]
  assert all(math.isclose(sum(g), 1.0) for g in grid)
  with pytest.raises(ValueError, match="step dividing 1"):
    fusion.simplex_grid(3, 0.3)
  with pytest.raises(ValueError, match="step dividing 1"):
    fusion.simplex_grid(3, 0.0)


def test_tune_weights_three_runs():
  # b is first when 1.8516 w3 > 1.2247 (w1 - w2) (b over a) and 2.3145 w3 > 1.2247 (w2 - w1)
  # (b over c). In the grid's order (w1 largest first, then w2), the first such weighting is
  # (0.6, 0, 0.4): b 0.5555 > a 0.5497; with w1 = 0.65, w2 = 0 it needs w3 > 0.43 > 0.35.
  best, values = fusion.tune_weights({"q1": {"b": 1}}, [FIRST, SECOND, THIRD])
  assert best == (0.6, 0.0, 0.4)
  assert len(values) == 231
  assert values[(1.0, 0.0, 0.0)] == pytest.approx(0.5)   # a, b, c: b second
  assert values[(0.0, 1.0, 0.0)] == pytest.approx(0.5)   # c, b, a
  assert values[(0.0, 0.0, 1.0)] == pytest.approx(1.0)
  assert max(values.values()) == pytest.approx(1.0)


def test_fuse_command_three_runs(tmp_path):
  paths = {}
  for name, run in (("first", FIRST), ("second", SECOND), ("third", THIRD)):
    paths[name] = str(tmp_path / f"{name}.run")
    write_run(paths[name], run, tag="x")
  (tmp_path / "qrels.txt").write_text("q1 0 b 1\n")
  out = str(tmp_path / "fused.run")
  runs = [paths["first"], paths["second"], paths["third"]]

  def fuse(*args):
    return subprocess.run([sys.executable, "-m", "t5rank.cli", "fuse", *args, "-o", out,
                           "--overwrite"], capture_output=True, text=True)

  result = fuse(*runs, "--weights", "0.5,0.25,0.25")
  assert result.returncode == 0, result.stderr
  assert [d for d, _ in read_run(out)["q1"]] == ["b", "a", "c"]
  result = fuse(*runs, "--tune", str(tmp_path / "qrels.txt"), *runs)
  assert result.returncode == 0, result.stderr
  assert "weights 0.6,0,0.4" in result.stdout and "231 weightings" in result.stdout
  for args, message in (((*runs, "--weight", "0.5"), "--weight is the second of two runs"),
                        ((*runs, "--weights", "0.5,0.5"), "2 weights for 3 runs"),
                        ((*runs, "--tune", str(tmp_path / "qrels.txt"), *runs[:2]),
                         "the qrels and 3 held-out runs"),
                        ((runs[0], "--weight", "0.5"), "two or more runs")):
    result = fuse(*args)
    assert result.returncode != 0 and message in result.stderr, (args, result.stderr)
  result = fuse(*runs, "--weights", "0.333333,0.333333,0.333334")  # thirds to 1e-6
  assert result.returncode == 0, result.stderr
  # a (1.2247 - 1.2247 - 0.4629) / 3 = -0.154, b 1.3887 / 3 = 0.463, c -0.9258 / 3 = -0.309
  assert [d for d, _ in read_run(out)["q1"]] == ["b", "a", "c"]
  result = fuse(*runs, "--weights", "0.5,0.6,0.25")
  assert result.returncode == 2 and "summing to 1" in result.stderr


def test_tuning_on_mrr_gives_what_trec_eval_gives_for_every_weighting():
  """tune_weights computes MRR for all weightings at once; each value equals trec_eval's (per_query)
  on the fused run, ties included (scores on a coarse grid, duplicate candidates), for queries
  missing from the runs and judged queries without a relevant candidate."""
  from t5rank.evaluation.metrics import per_query

  rng = np.random.default_rng(3)
  ids = [f"d{i}" for i in (1, 2, 10, 11, 20, 100, 3, 30)]
  runs = [{} for _ in range(3)]
  qrels = {}
  for q in range(12):
    docs = list(rng.choice(ids, size=6, replace=False))
    for run in runs:  # scores in steps of .5: many ties, in the runs and in their fusions
      run[f"q{q}"] = [(d, float(rng.integers(0, 4)) / 2) for d in docs]
    runs[2][f"q{q}"][1] = (docs[1], runs[2][f"q{q}"][0][1])
    judged = docs[:2] if q % 3 else [d for d in ids if d not in docs][:1]  # q0, q3..: none ranked
    qrels[f"q{q}"] = {d: 1 for d in judged} | {docs[-1]: 0}
  qrels["q_missing"] = {"d1": 1}
  qrels["q0"] = {d: 0 for d in qrels["q0"]}  # judged, nothing relevant: not averaged over
  del qrels["q11"]  # ranked, not judged: ignored
  # trec_eval keeps scores as C floats: two answers closer than float32 resolves tie (and are
  # ordered by id), here after fusion, where the third run alone separates d100 from d2 by 1e-9
  near = [("d100", 1.0), ("d2", 1.0), ("d3", 0.0)]
  runs[0]["q_near"], runs[1]["q_near"] = near, near
  runs[2]["q_near"] = [("d100", 1.0 + 1e-9), ("d2", 1.0), ("d3", 0.0)]
  qrels["q_near"] = {"d100": 1}
  grid = fusion.simplex_grid(3, 0.1)
  for union in (False, True):
    best, values = fusion.tune_weights(qrels, runs, grid=grid, metric="MRR", union=union)
    fusable = fusion._Fusable(runs, union=union)
    slow = {g: float(per_query(qrels, fusable.fuse(g), ["MRR"])["MRR"].mean()) for g in grid}
    assert values == slow
    assert len(set(slow.values())) > 3  # the weightings rank differently
    assert best == max(grid, key=lambda g: (slow[g], -grid.index(g)))
  near_tie = per_query(qrels, fusable.fuse((0.0, 0.0, 1.0)), ["MRR"])["MRR"]
  assert near_tie[sorted(q for q in qrels if q != "q0").index("q_near")] == 0.5  # d2 > d100
  with pytest.raises(ValueError, match="summing to 1"):
    fusion.tune_weights(qrels, runs, grid=[(0.5, 0.6, 0.0)], metric="MRR")
