"""The Python front door takes what sentence-transformers' CrossEncoder and pyterrier_t5's users
pass (#67 item 9): batch_size, show_progress_bar, activation_fn, apply_softmax (refused, with why),
convert_to_numpy / convert_to_tensor, a single pair, top_k=0; PyTerrier's batch_size and verbose."""

from __future__ import annotations

import numpy as np
import pytest

import t5rank
from t5rank.testing import SAMPLE_DOCUMENTS, SAMPLE_QUERY
from test_serve import OPTIONS, checkpoint  # noqa: F401


@pytest.fixture(scope="module")
def ranker(checkpoint):  # noqa: F811
  return t5rank.load(checkpoint, **OPTIONS)


PAIRS = [(SAMPLE_QUERY, d) for d in SAMPLE_DOCUMENTS]


def test_predict_takes_crossencoders_keywords(ranker):
  plain = ranker.predict(PAIRS)
  assert plain.dtype == np.float64 and plain.shape == (6,) and np.all(plain <= 0)  # log P(true)
  # other batches, other shapes: the same scores to float rounding
  np.testing.assert_allclose(ranker.predict(PAIRS, batch_size=1, show_progress_bar=True), plain,
                             atol=1e-6)
  single = ranker.predict(PAIRS[2])
  assert np.ndim(single) == 0 and abs(single - plain[2]) < 1e-6  # scored alone: one shape
  np.testing.assert_allclose(ranker.predict(PAIRS, activation_fn="probability"), np.exp(plain))
  np.testing.assert_allclose(ranker.predict(PAIRS, activation_fn=np.tanh), np.tanh(plain))
  assert ranker.predict(PAIRS, convert_to_numpy=False) == plain.tolist()
  with pytest.raises(ValueError, match="apply_softmax: t5rank gives one score per pair"):
    ranker.predict(PAIRS, apply_softmax=True)
  with pytest.raises(ValueError, match="batch_size must be a positive number"):
    ranker.predict(PAIRS, batch_size=0)
  try:
    import torch
  except ImportError:
    with pytest.raises(ValueError, match="convert_to_tensor needs torch"):
      ranker.predict(PAIRS, convert_to_tensor=True)
  else:
    np.testing.assert_allclose(ranker.predict(PAIRS, convert_to_tensor=True).numpy(), plain)
    np.testing.assert_allclose(ranker.predict(PAIRS, activation_fn=torch.nn.Sigmoid()),
                               1 / (1 + np.exp(-plain)))


def test_rank_takes_crossencoders_keywords(ranker):
  plain = ranker.rank(SAMPLE_QUERY, SAMPLE_DOCUMENTS)
  assert ranker.rank(SAMPLE_QUERY, SAMPLE_DOCUMENTS, top_k=0) == []
  batched = ranker.rank(SAMPLE_QUERY, SAMPLE_DOCUMENTS, batch_size=2, show_progress_bar=False)
  assert [r["corpus_id"] for r in batched] == [r["corpus_id"] for r in plain]
  np.testing.assert_allclose([r["score"] for r in batched], [r["score"] for r in plain], atol=1e-6)
  probability = ranker.rank(SAMPLE_QUERY, SAMPLE_DOCUMENTS, top_k=3, activation_fn="probability",
                            convert_to_numpy=True, return_documents=True)
  assert [r["corpus_id"] for r in probability] == [r["corpus_id"] for r in plain[:3]]
  np.testing.assert_allclose([r["score"] for r in probability],
                             np.exp([r["score"] for r in plain[:3]]))
  assert probability[0]["text"] == SAMPLE_DOCUMENTS[plain[0]["corpus_id"]]


def test_the_pyterrier_transformer_takes_pyterrier_t5s_keywords(checkpoint):  # noqa: F811
  import pandas as pd

  from t5rank.pyterrier import Reranker

  mono = Reranker(checkpoint, batch_size=2, verbose=False, **OPTIONS)
  frame = pd.DataFrame({"qid": ["q"] * 3, "query": [SAMPLE_QUERY] * 3, "docno": ["a", "b", "c"],
                        "text": list(SAMPLE_DOCUMENTS[:3])})
  out = mono.transform(frame)
  expected = t5rank.load(checkpoint, **OPTIONS).rank(SAMPLE_QUERY, list(SAMPLE_DOCUMENTS[:3]))
  assert list(out["docno"]) == ["abc"[r["corpus_id"]] for r in expected]
