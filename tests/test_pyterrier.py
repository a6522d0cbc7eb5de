"""The PyTerrier extra: t5rank checkpoints as PyTerrier transformers on a results frame (`qid,
query, docno, text` in, `score` and `rank` out), with PyTerrier installed and no Java."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pt = pytest.importorskip("pyterrier")  # the `pyterrier` extra; the `test` extra installs it

import t5rank  # noqa: E402
from t5rank.pyterrier import FIRST_STAGE, Reranker  # noqa: E402
from t5rank.testing import SAMPLE_BM25, SAMPLE_DOCUMENTS, SAMPLE_QUERY  # noqa: E402

QUERY, DOCUMENTS, BM25 = SAMPLE_QUERY, list(SAMPLE_DOCUMENTS), list(SAMPLE_BM25)


def frame() -> pd.DataFrame:
  rows = [{"qid": "q1", "query": QUERY, "docno": f"d{i}", "text": t, "score": s}
          for i, (t, s) in enumerate(zip(DOCUMENTS, BM25))]
  rows.append({"qid": "q2", "query": "what is a deductible", "docno": "d5", "text": DOCUMENTS[5],
               "score": 3.0})
  return pd.DataFrame(rows)


def test_a_checkpoint_reranks_a_results_frame_as_rank_does():
  mono = Reranker("shipped:monot5")
  out = mono(frame())
  q1 = out[out.qid == "q1"]
  expected = t5rank.load("shipped:monot5").rank(QUERY, DOCUMENTS, first_stage_scores=BM25)
  assert q1.docno.tolist() == [f"d{r['corpus_id']}" for r in expected]
  np.testing.assert_allclose(q1.score, [r["score"] for r in expected], atol=1e-6)
  assert q1["rank"].tolist() == list(range(6)) and out[out.qid == "q2"]["rank"].tolist() == [0]
  assert q1[FIRST_STAGE].tolist() == [BM25[int(d[1:])] for d in q1.docno]  # kept for later stages


def test_a_pipeline_with_a_cutoff_and_duot5_reads_the_first_stage_scores():
  pipeline = Reranker("shipped:monot5") % 3 >> Reranker("shipped:duot5")
  out = pipeline(frame())
  q1 = out[out.qid == "q1"]
  assert len(q1) == 3 and q1["rank"].tolist() == [0, 1, 2]
  top3 = Reranker("shipped:monot5")(frame())
  top3 = top3[(top3.qid == "q1") & (top3["rank"] < 3)]
  expected = t5rank.load("shipped:duot5").rank(QUERY, top3.text.tolist(),
                                                first_stage_scores=top3[FIRST_STAGE].tolist())
  assert q1.docno.tolist() == [top3.docno.iloc[r["corpus_id"]] for r in expected]


def test_a_frame_without_text_is_refused_naming_the_columns():
  with pytest.raises(ValueError, match="lacks text"):
    Reranker("shipped:tk")(frame().drop(columns=["text"]))
