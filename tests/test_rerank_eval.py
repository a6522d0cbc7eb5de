"""Training-time evaluation reads the one InsuranceQA loader and computes its metrics with
`t5rank evaluate`'s code: the same MRR@10, MRR and P@1 on the same scores, ties included.

Literal records stand in for the package's data; the model's scores are fixed by hand so that the
ranks can be worked out: trec_eval breaks a tie by document id, descending.
"""

from __future__ import annotations

import json

import insuranceqa_data
import numpy as np
import pytest

from t5rank import cli
from t5rank.training import rerank_eval

ANSWERS = {str(i): {"en": f"answer  {i}\t text", "zh": f"答案{i}"} for i in range(1, 13)}
VALID = {
    # pool 1, 2, 3, 4 (ids sorted numerically); relevant 2
    "7": {"en": "first  question?", "zh": "问题一", "answers": ["2"], "negatives": ["3", "1", "4"]},
    # pool 5, 6, 10, 11; relevant 10 and 11
    "3": {"en": " second question ", "zh": "问题二", "answers": ["10", "11"],
          "negatives": ["5", "6", "10"]},
    # pool 8, 9, 12; relevant 8
    "12": {"en": "third", "zh": "问题三", "answers": ["8"], "negatives": ["9", "12"]},
}
# Scores in pool order (queries by id: 3, 7, 12).
SCORES = {"3": [0.1, 0.2, 0.5, 0.5],   # 5, 6, 10, 11: 10 and 11 tie at the top
          "7": [0.9, 0.4, 0.4, 0.9],   # 1, 2, 3, 4: 1 and 4 tie at the top, 2 and 3 tie after
          "12": [-1.0, -1.0, -1.0]}    # 8, 9, 12: all tie; order 9, 8, 12 by id as strings, desc
# Worked out, ids compared as strings: q3 -> 11, 10 ("11" > "10"): relevant 11 at rank 1 (RR 1);
# q7 -> 4, 1, 3, 2: relevant 2 at rank 4 (RR 1/4; a stable sort in pool order would say 1/3);
# q12 -> 9, 8, 12 ("9" > "8" > "12"): relevant 8 at rank 2 (RR 1/2; pool order would say 1).
EXPECTED = {"mrr@10": (1 + 1 / 4 + 1 / 2) / 3, "mrr": (1 + 1 / 4 + 1 / 2) / 3, "p@1": 1 / 3}


@pytest.fixture
def evaluation(monkeypatch):
  monkeypatch.setattr(insuranceqa_data, "load_answers", lambda: ANSWERS)
  monkeypatch.setattr(insuranceqa_data, "load_valid", lambda: VALID)
  evaluation = rerank_eval.RerankEval("validation", num_queries=3, max_length=32)
  flat = np.array([s for qid in ("3", "7", "12") for s in SCORES[qid]], np.float32)
  monkeypatch.setattr(evaluation, "scores", lambda params, config: (flat, np.exp(flat)))
  return evaluation


def test_pools_and_texts_come_from_the_one_loader(evaluation):
  assert evaluation.pairs == [("3", "5"), ("3", "6"), ("3", "10"), ("3", "11"), ("7", "1"),
                              ("7", "2"), ("7", "3"), ("7", "4"), ("12", "8"), ("12", "9"),
                              ("12", "12")]
  assert evaluation.queries[0] == "second question" and evaluation.passages[0] == "answer 5 text"
  assert evaluation.qrels == {"3": {"10": 1, "11": 1}, "7": {"2": 1}, "12": {"8": 1}}


def test_training_eval_equals_t5rank_evaluate_ties_included(evaluation, tmp_path, capsys):
  metrics = evaluation(None, None)
  assert metrics == pytest.approx(EXPECTED, abs=1e-9)
  run = tmp_path / "run.txt"
  qrels = tmp_path / "qrels.txt"
  scores = iter(evaluation.scores(None, None)[0].tolist())
  run.write_text("".join(f"{qid} Q0 {aid} 0 {next(scores)!r} model\n"
                         for qid, aid in evaluation.pairs))
  qrels.write_text("".join(f"{qid} 0 {aid} {rel}\n" for qid, docs in evaluation.qrels.items()
                           for aid, rel in docs.items()))
  assert cli.main(["evaluate", "--qrels", str(qrels), str(run), "--metrics", "MRR@10,MRR,P@1",
                   "--json"]) == 0
  report = json.loads(capsys.readouterr().out)
  means = report["runs"][0]["mean"]
  assert {"mrr@10": means["MRR@10"], "mrr": means["MRR"], "p@1": means["P@1"]} == \
      pytest.approx(metrics, abs=1e-9)


def test_the_xpr_evaluation_reads_the_cross_lingual_pools(monkeypatch):
  from t5rank.data.xpr import answer_of, xpr_split

  monkeypatch.setattr(insuranceqa_data, "load_answers", lambda: ANSWERS)
  monkeypatch.setattr(insuranceqa_data, "load_valid", lambda: VALID)
  evaluation = rerank_eval.RerankEval("validation", num_queries=3, max_length=32, xpr_seed=5)
  built = xpr_split("validation", 5, 3)
  assert evaluation.pairs == [(q, d) for q, pool in built.pools.items() for d in pool]
  assert [answer_of(d)[0] for _, d in evaluation.pairs] == [
      "5", "6", "10", "11", "1", "2", "3", "4", "8", "9", "12"]  # the same pools, half translated
  for (qid, d), query, passage in zip(evaluation.pairs, evaluation.queries, evaluation.passages):
    aid, language = answer_of(d)
    assert passage == ("答案" + aid if language == "zh" else f"answer {aid} text")
    assert query == {"en": VALID[qid]["en"].strip().replace("  ", " "), "zh": VALID[qid]["zh"]}[
        built.query_language[qid]]
  assert evaluation.qrels == built.qrels()
  with pytest.raises(ValueError, match="no BM25-input variant"):
    rerank_eval.RerankEval("validation", num_queries=3, xpr_seed=5, bm25_in_input=True)
