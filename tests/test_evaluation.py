"""Metrics on a small run checked by hand (trec_eval semantics: ties by document id descending,
missing queries score 0), the paired t-test against scipy, and the `t5rank evaluate` command."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from t5rank import cli
from t5rank.evaluation.metrics import evaluate, format_table, paired_t_test, parse_metric, per_query

QRELS = {"q1": {"d1": 1, "d2": 2, "d3": 0},
         "q2": {"d4": 1},
         "q3": {"d5": 1},  # not in the run: scores 0
         "q4": {"d6": 0}}  # no relevant document: not averaged over
RUN = {"q1": [("d3", 0.9), ("d1", 0.8), ("d7", 0.7), ("d2", 0.6)],
       # A tie: trec_eval ranks d8 before d4 (document id descending), so d4 is at rank 2.
       "q2": [("d4", 0.5), ("d8", 0.5)],
       "q9": [("d1", 1.0)]}  # not judged: ignored
# q1: relevant d1 (gain 1) at rank 2, d2 (gain 2) at rank 4.
#   RR 1/2; AP (1/2 + 2/4) / 2 = 1/2; P@1 0; P@20 2/20; recall 1; acc@10 1
#   nDCG@10 = (1/log2(3) + 2/log2(5)) / (2/log2(2) + 1/log2(3)) = 1.492283 / 2.630930 = 0.567208
# q2: d4 at rank 2: RR 1/2; AP 1/2; P@20 1/20; nDCG@10 = 1/log2(3) = 0.630930
# q3: 0 everywhere. Means over q1, q2, q3:
EXPECTED = {"MRR": 1 / 3, "MRR@10": 1 / 3, "MRR@1": 0.0, "MAP": 1 / 3, "P@1": 0.0, "P@20": 0.05,
            "nDCG@10": (0.567208 + 0.630930) / 3, "recall@1000": 2 / 3, "acc@10": 2 / 3,
            "acc@1": 0.0}


def test_metrics_by_hand():
  values = per_query(QRELS, RUN, list(EXPECTED))
  assert values["nDCG@10"] == pytest.approx([0.567208, 0.630930, 0.0], abs=1e-6)
  assert values["MRR"].tolist() == [0.5, 0.5, 0.0]
  means = {m: v.mean() for m, v in values.items()}
  assert means == pytest.approx(EXPECTED, abs=1e-6)
  # The cutoff of MRR@k applies to trec_eval's order: at depth 2 both queries find theirs.
  assert per_query(QRELS, RUN, ["MRR@2"])["MRR@2"].tolist() == [0.5, 0.5, 0.0]


def test_the_cutoff_of_mrr_at_k_compares_scores_as_trec_eval_keeps_them():
  # trec_eval keeps scores as C floats: 1 + 1e-9 and 1 tie in float32, so d2 (the larger id) is
  # first and MRR@1 is trec_eval's RR; cut in float64, d1 would be first and d2 cut off
  qrels = {"q": {"d2": 1}}
  run = {"q": [("d1", 1.0 + 1e-9), ("d2", 1.0), ("d3", 0.5)]}
  values = per_query(qrels, run, ["MRR", "MRR@1"])
  assert values["MRR"].tolist() == [1.0] and values["MRR@1"].tolist() == [1.0]
  # scores that differ in float32 keep their order
  run = {"q": [("d1", 1.0 + 1e-6), ("d2", 1.0)]}
  values = per_query(qrels, run, ["MRR", "MRR@1"])
  assert values["MRR"].tolist() == [0.5] and values["MRR@1"].tolist() == [0.0]


def test_metric_names():
  assert parse_metric("nDCG@20") == ("nDCG", 20)
  assert parse_metric("MRR") == ("MRR", None)
  for bad in ("P", "MAP@0", "ndcg@10", "acc@0", "MRR@"):
    with pytest.raises(ValueError, match="unknown metric"):
      parse_metric(bad)


def test_paired_t_test_and_bonferroni():
  better = {q: [(d, 1.0)] for q, d in (("q1", "d2"), ("q2", "d4"), ("q3", "d5"))}  # RR 1, 1, 1
  # Differences from RUN on RR: 1/2, 1/2, 1: mean 2/3, sd sqrt(1/12), t = (2/3) / (sd / sqrt(3)) = 4;
  # two-sided p with 2 degrees of freedom = 1 - t / sqrt(t^2 + 2) = 1 - 4 / sqrt(18).
  t, p = paired_t_test(np.array([1.0, 1.0, 1.0]), np.array([0.5, 0.5, 0.0]))
  assert t == pytest.approx(4.0)
  assert p == pytest.approx(1 - 4 / math.sqrt(18))
  assert p == pytest.approx(stats.ttest_rel([1.0, 1.0, 1.0], [0.5, 0.5, 0.0]).pvalue)
  assert paired_t_test(np.array([0.5, 1.0]), np.array([0.5, 1.0])) == (0.0, 1.0)

  report = evaluate(QRELS, {"base": RUN, "better": better, "same": RUN}, ["MRR", "P@1"], alpha=0.2)
  assert report["queries"] == 3 and report["comparisons"] == 2
  base, best, same = report["runs"]
  assert "vs_baseline" not in base and base["missing_queries"] == 1
  assert best["vs_baseline"]["MRR"]["p"] == pytest.approx(p)
  assert best["vs_baseline"]["MRR"]["p_bonferroni"] == pytest.approx(2 * p)  # 2 runs compared
  assert best["vs_baseline"]["MRR"]["significant"]  # 0.114 < 0.2
  # P@1: 0, 0, 0 -> 1, 1, 1: every difference +1, no variance, no test (and no star)
  assert best["mean"]["P@1"] == 1.0
  assert best["vs_baseline"]["P@1"] == {
      "t": None, "p": None, "p_bonferroni": None, "significant": False,
      "no_test": "the per-query differences are all the same (no variance)"}
  assert same["vs_baseline"]["MRR"] == {"t": 0.0, "p": 1.0, "p_bonferroni": 1.0,
                                        "significant": False}
  text = format_table(report)
  table = text.splitlines()
  assert table[0].split() == ["run", "MRR", "P@1"]
  assert table[2].split() == ["better", "1.0000*", "1.0000"]
  assert table[6].split() == ["better", f"{2 * p:.4f}", "n/a"]
  assert "Bonferroni-corrected over 2 runs" in text
  assert "n/a: no t-test can be made (the per-query differences are all the same (no variance))" \
      in text


def test_no_t_test_without_variance_or_with_one_query():
  # Three queries, each 0.1 better than the baseline: scipy says t = inf, p = 0, which is no
  # evidence; in floats 0.35 - 0.25 and 0.95 - 0.85 differ by 6e-17, and scipy says p = 4e-32.
  for values, baseline in [([0.5, 0.6, 0.7], [0.4, 0.5, 0.6]),
                           ([0.35, 0.45, 0.95], [0.25, 0.35, 0.85]),
                           ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0]),
                           ([0.25, 0.5, 1.0], [0.5, 0.75, 1.25]),  # each -0.25
                           ([0.9], [0.1])]:  # one query
    t, p = paired_t_test(np.array(values), np.array(baseline))
    assert math.isnan(t) and math.isnan(p), (values, baseline, t, p)
  # Runs that agree on every query: nothing to test, p = 1; so with one query.
  assert paired_t_test(np.array([0.3, 0.6, 0.1]), np.array([0.3, 0.6, 0.1])) == (0.0, 1.0)
  assert paired_t_test(np.array([0.3]), np.array([0.3])) == (0.0, 1.0)
  # Some variance: a real test.
  t, p = paired_t_test(np.array([0.5, 0.6, 0.8]), np.array([0.4, 0.5, 0.6]))
  # differences .1, .1, .2: mean 2/15, sd sqrt(1/300), t = (2/15) / (sd / sqrt(3)) = 4
  assert t == pytest.approx(4.0) and p == pytest.approx(1 - 4 / math.sqrt(18))


def test_evaluate_command_says_when_no_test_can_be_made(tmp_path, capsys):
  # Three queries; the better run finds each query's answer at rank 1 rather than rank 2: the MRR
  # differences are +0.5, +0.5, +0.5. One query: a single difference.
  qrels, base, better = tmp_path / "qrels.txt", tmp_path / "base.run", tmp_path / "better.run"
  qrels.write_text("q1 0 a 1\nq2 0 b 1\nq3 0 c 1\n")
  base.write_text("".join(f"{q} Q0 x 1 2 base\n{q} Q0 {d} 2 1 base\n"
                          for q, d in (("q1", "a"), ("q2", "b"), ("q3", "c"))))
  better.write_text("".join(f"{q} Q0 {d} 1 2 better\n{q} Q0 x 2 1 better\n"
                            for q, d in (("q1", "a"), ("q2", "b"), ("q3", "c"))))
  assert cli.main(["evaluate", "--qrels", str(qrels), str(base), str(better),
                   "--metrics", "MRR"]) == 0
  out = capsys.readouterr().out
  lines = out.splitlines()
  assert lines[1].split() == ["base.run", "0.5000"]
  assert lines[2].split() == ["better.run", "1.0000"]  # no star
  assert lines[5].split() == ["better.run", "n/a"]
  assert "no t-test can be made (the per-query differences are all the same (no variance))" in out
  assert cli.main(["evaluate", "--qrels", str(qrels), str(base), str(better), "--metrics", "MRR",
                   "--json"]) == 0
  report = json.loads(capsys.readouterr().out)  # valid JSON: no NaN
  assert report["runs"][1]["vs_baseline"]["MRR"]["p"] is None
  qrels.write_text("q1 0 a 1\n")
  assert cli.main(["evaluate", "--qrels", str(qrels), str(base), str(better),
                   "--metrics", "MRR"]) == 0
  out = capsys.readouterr().out
  assert out.splitlines()[2].split() == ["better.run", "1.0000"]
  assert "no t-test can be made (fewer than 2 queries)" in out


def test_evaluate_command(tmp_path, capsys):
  qrels, base = tmp_path / "qrels.txt", tmp_path / "base.run"
  qrels.write_text("".join(f"{q} 0 {d} {r}\n" for q, docs in QRELS.items() for d, r in docs.items()))
  base.write_text("".join(f"{q} Q0 {d} {i + 1} {s} base\n" for q, docs in RUN.items()
                          for i, (d, s) in enumerate(docs)))
  assert cli.main(["evaluate", "--qrels", str(qrels), str(base), "--json",
                   "--metrics", "MRR,nDCG@10"]) == 0
  report = json.loads(capsys.readouterr().out)
  assert report["runs"][0]["name"] == "base.run"
  assert report["runs"][0]["mean"] == pytest.approx(
      {"MRR": EXPECTED["MRR"], "nDCG@10": EXPECTED["nDCG@10"]}, abs=1e-6)
  with pytest.raises(SystemExit):
    cli.main(["evaluate", "--qrels", str(qrels), str(base), "--metrics", "MRR,bogus"])
  assert "unknown metric 'bogus'" in capsys.readouterr().err
