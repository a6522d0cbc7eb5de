"""Cross-lingual breakdowns (t5rank.evaluation.languages, `t5rank evaluate --xpr`) on literal runs."""

import json

import pytest

from t5rank import cli
from t5rank.evaluation import languages

# q1 (en): relevant 1 in English (same); q2 (zh): relevant 2 in English (other);
# q3 (zh): relevant 3 and 4, one per language (both).
QRELS = {"q1": {"1": 1}, "q2": {"2": 1}, "q3": {"3:zh": 1, "4": 1}}
LANG = {"q1": "en", "q2": "zh", "q3": "zh"}
RUN = {"q1": [("9:zh", 3.0), ("1", 2.0), ("8", 1.0)],         # relevant at 2: RR 1/2
       "q2": [("7:zh", 3.0), ("6:zh", 2.0), ("2", 1.0)],      # relevant at 3: RR 1/3
       "q3": [("3:zh", 3.0), ("5:zh", 2.0), ("4", 1.0)]}      # relevant at 1 and 3: RR 1


def test_groups_by_query_and_relevant_answer_language():
  assert [languages.relevant_language(QRELS, q, LANG[q]) for q in ("q1", "q2", "q3")] == [
      "same", "other", "both"]
  rows = languages.language_breakdown(QRELS, RUN, LANG, metrics=("MRR", "P@1"))
  assert [(r["query_language"], r["relevant"], r["queries"]) for r in rows] == [
      ("en", "same", 1), ("en", "all", 1), ("zh", "other", 1), ("zh", "both", 1), ("zh", "all", 2)]
  assert rows[0]["mean"] == pytest.approx({"MRR": 0.5, "P@1": 0.0})
  assert rows[4]["mean"] == pytest.approx({"MRR": (1 / 3 + 1) / 2, "P@1": 0.5})


def test_preference_for_the_querys_language():
  pref = languages.language_preference(QRELS, RUN, LANG, k=2)
  # non-relevant in the top 2: q1 {9:zh} -> 0 (en query); q2 {7:zh, 6:zh} -> 1; q3 {5:zh} -> 1
  assert pref["top_k_nonrelevant"] == pytest.approx(2 / 3)
  # the same by query language: en (q1) 0; zh (q2, q3) 1
  assert pref["top_k_nonrelevant_en"] == pytest.approx(0.0)
  assert pref["top_k_nonrelevant_zh"] == pytest.approx(1.0)
  # whole pool: q1 {9:zh, 8} -> 1/2; q2 {7:zh, 6:zh} -> 1; q3 {5:zh} -> 1
  assert pref["pool_nonrelevant"] == pytest.approx((0.5 + 1 + 1) / 3)
  # relevant in the top 2: q1 {1} -> 1; q2 none; q3 {3:zh} -> 1
  assert pref["top_k_relevant"] == pytest.approx(1.0)
  assert pref["pool_relevant"] == pytest.approx((1 + 0 + 0.5) / 3)


def test_evaluate_prints_the_breakdown(tmp_path, capsys):
  qrels = tmp_path / "qrels.txt"
  qrels.write_text("".join(f"{q} 0 {d} 1\n" for q, docs in QRELS.items() for d in docs))
  run = tmp_path / "model.run"
  run.write_text("".join(f"{q} Q0 {d} {i + 1} {s} m\n" for q, docs in RUN.items()
                         for i, (d, s) in enumerate(docs)))
  xpr = tmp_path / "xpr.json"
  xpr.write_text(json.dumps({"query_language": LANG}))
  assert cli.main(["evaluate", "--qrels", str(qrels), str(run), "--xpr", str(xpr)]) == 0
  out = capsys.readouterr().out
  assert "model.run: by query language" in out and "    zh     other        1" in out
  assert ("non-relevant in the top 10 0.833 (en queries 0.500, zh queries 1.000; whole pool 0.833)"
          in out)  # top 10 = the whole pool here: q1 {9:zh, 8} -> 1/2, q2 and q3 -> 1
  xpr.write_text(json.dumps({"query_language": {"q1": "en"}}))
  with pytest.raises(SystemExit, match="no language for 2 qrels queries"):
    cli.main(["evaluate", "--qrels", str(qrels), str(run), "--xpr", str(xpr)])
