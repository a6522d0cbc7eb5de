"""The InsuranceQA export on literal records standing in for the package's data."""

from __future__ import annotations

import insuranceqa_data

from t5rank.data.insuranceqa import export_insuranceqa
from t5rank.data.readers import Document, read_corpus, read_qrels, read_queries, read_run

ANSWERS = {"1": {"en": " Coverage follows\tthe car. ", "zh": "保险跟着车。"},
           "2": {"en": "Term life pays out.", "zh": "定期寿险。"},
           "10": {"en": "Renters insurance covers items.", "zh": "租客保险。"}}
TEST = {"0": {"en": "What  Happens  When?", "zh": "会发生什么？", "domain": "life-insurance",
              "answers": ["2"], "negatives": ["10", "1", "2"]}}


def test_export_insuranceqa(tmp_path, monkeypatch):
  monkeypatch.setattr(insuranceqa_data, "load_answers", lambda: ANSWERS)
  monkeypatch.setattr(insuranceqa_data, "load_test", lambda: TEST)
  paths = export_insuranceqa(str(tmp_path), "test", "en")
  assert read_queries(paths["queries.tsv"]) == {"0": "What Happens When?"}
  assert read_corpus(paths["corpus.jsonl"]) == {"1": Document("Coverage follows the car."),
                                                "2": Document("Term life pays out."),
                                                "10": Document("Renters insurance covers items.")}
  assert read_qrels(paths["qrels.txt"]) == {"0": {"2": 1}}
  # The pool: relevant answers and negatives once each, by answer id, all score 0.
  assert read_run(paths["pool.run"]) == {"0": [("1", 0.0), ("2", 0.0), ("10", 0.0)]}
  zh = export_insuranceqa(str(tmp_path / "zh"), "test", "zh")
  assert read_queries(zh["queries.tsv"]) == {"0": "会发生什么？"}
