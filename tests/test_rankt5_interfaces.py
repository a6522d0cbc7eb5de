"""Both RankT5 families (#70) through every interface monoT5 has, each checked against the score
computed by hand from its definition: the Encoder-Decoder's logit of <extra_id_10> (32089) at the
first decoder step of `Query: q Document: d`, the Encoder-only's dense layer on the first encoder
position. `t5rank score`, `t5rank.load(...).rank`, `t5rank serve` (all three wire shapes, `/info`
saying the score is not a log-probability), a stage of `t5rank rerank`, and PyTerrier."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
import requests
from test_rankt5 import by_hand_ids, network_logit  # noqa: E402  (tests/ is on the path)
from test_serve import Running  # noqa: E402

import t5rank
from t5rank import cli
from t5rank.data.readers import read_run
from t5rank.models.network import T5
from t5rank.models.vocab import load_vocabulary
from t5rank.testing import micro_config, random_params

QUERIES = {"q1": "does car insurance cover theft", "q2": "is my deductible per claim"}
TEXTS = {f"d{i}": text for i, text in enumerate([
    "Car insurance covers theft of the car.", "Life insurance pays a death benefit.",
    "Theft is not covered here.", "Yes, you pay the deductible each time you claim.",
    "Annuities pay an income for life.", "The deductible is per year, not per claim."])}
OPTIONS = dict(max_length=64, batch_tokens=256)


def save_rankt5(path: str):
  """A micro RankT5 Encoder-Decoder and its score by hand."""
  from t5rank.models.t5_weights import save_checkpoint

  config = micro_config()
  params = random_params(config, seed=5, std=0.5)
  save_checkpoint(path, params, config, {"model": "rankt5"})
  vocab = load_vocabulary()
  return lambda q, d: network_logit(config, params, by_hand_ids(vocab, q, d), 32089)


def save_rankt5_encoder(path: str):
  """A micro RankT5 Encoder-only and its score by hand: h(first position) . w + b."""
  from t5rank.checkpoints import native
  from t5rank.models import classifier, rankt5_encoder

  t5_config = micro_config()
  rng = np.random.default_rng(0)
  params = {"t5": classifier.encoder_params(random_params(t5_config, seed=7, std=0.5)),
            "head": {"kernel": rng.normal(0, 0.3, (32, 1)).astype(np.float32),
                     "bias": np.array([0.25], np.float32)}}
  native.save_checkpoint(path, params, rankt5_encoder.RankT5EncoderConfig(t5=t5_config),
                         extra_metadata={"model": "rankt5_encoder"})
  vocab = load_vocabulary()

  def by_hand(q, d):
    encoded = T5(t5_config).apply({"params": params["t5"]}, jnp.asarray([by_hand_ids(vocab, q, d)]),
                                  method=T5.encode)
    return float(np.asarray(encoded)[0, 0] @ params["head"]["kernel"][:, 0] + 0.25)

  return by_hand


SAVERS = {"rankt5": save_rankt5, "rankt5_encoder": save_rankt5_encoder}


@pytest.fixture(scope="module", params=sorted(SAVERS))
def model(request, tmp_path_factory):
  """(family, checkpoint path, score by hand)."""
  path = str(tmp_path_factory.mktemp(request.param) / "model")
  return request.param, path, SAVERS[request.param](path)


def test_load_rank_orders_by_the_score_by_hand(model):
  family, path, by_hand = model
  ranker = t5rank.load(path, **OPTIONS)
  assert ranker.family == family and not ranker.reranker.log_probability
  texts = list(TEXTS.values())
  expected = [by_hand(QUERIES["q1"], t) for t in texts]
  assert np.ptp(expected) > 0.05  # texts the model tells apart: the order is a check
  ranked = ranker.rank(QUERIES["q1"], texts)
  assert [r["corpus_id"] for r in ranked] == list(np.argsort(expected)[::-1])
  np.testing.assert_allclose([r["score"] for r in ranked], sorted(expected, reverse=True),
                             rtol=1e-5, atol=1e-5)


def write_inputs(tmp_path) -> tuple[str, str, str]:
  (tmp_path / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
  (tmp_path / "c.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in TEXTS.items()))
  (tmp_path / "r.run").write_text("".join(f"{q} Q0 {d} {i + 1} {-i} bm25\n" for q in QUERIES
                                          for i, d in enumerate(TEXTS)))
  return str(tmp_path / "q.tsv"), str(tmp_path / "c.tsv"), str(tmp_path / "r.run")


def test_t5rank_score_writes_the_score_by_hand(model, tmp_path):
  _, path, by_hand = model
  queries, corpus, run = write_inputs(tmp_path)
  assert cli.main(["score", "--checkpoint", path, "--queries", queries, "--corpus", corpus,
                   "--run", run, "--window", "0", "-o", str(tmp_path / "out.run")]) == 0
  got = read_run(str(tmp_path / "out.run"))
  for q, query in QUERIES.items():
    scores = dict(got[q])
    assert scores.keys() == TEXTS.keys()
    expected = [by_hand(query, t) for t in TEXTS.values()]
    np.testing.assert_allclose([scores[d] for d in TEXTS], expected, rtol=1e-5, atol=1e-5)


def test_serve_answers_the_score_by_hand_and_says_it_is_no_log_probability(model):
  family, path, by_hand = model
  running = Running(t5rank.load(path, **OPTIONS), max_wait_ms=20)
  try:
    running.wait_ready()
    query, texts = QUERIES["q2"], list(TEXTS.values())
    expected = [by_hand(query, t) for t in texts]
    order = list(np.argsort(expected)[::-1])
    raw = requests.post(running.url + "/rerank",
                        json={"query": query, "texts": texts, "raw_scores": True}).json()
    assert [r["index"] for r in raw] == order
    np.testing.assert_allclose([r["score"] for r in raw], [expected[i] for i in order], atol=1e-5)
    normalized = requests.post(running.url + "/rerank",
                               json={"query": query, "texts": texts}).json()
    sigmoid = [1 / (1 + math.exp(-expected[i])) for i in order]  # TEI's rule for a raw score
    np.testing.assert_allclose([r["score"] for r in normalized], sigmoid, atol=1e-5)
    cohere = requests.post(running.url + "/v1/rerank",
                           json={"query": query, "documents": texts, "top_n": 2}).json()
    assert [r["index"] for r in cohere["results"]] == order[:2]
    np.testing.assert_allclose([r["relevance_score"] for r in cohere["results"]], sigmoid[:2],
                               atol=1e-5)
    info = requests.get(running.url + "/info").json()
    assert info["family"] == family
    assert "not a log-probability" in info["score"] and "sigmoid" in info["score"]
  finally:
    running.stop()


def test_a_cascade_stage_of_each_family_scores_as_by_hand(tmp_path):
  """`t5rank rerank`: a run of 6 candidates a query (tagged bm25), then the Encoder-Decoder over
  its top 5, then the Encoder-only over the top 3 of that: each stage's reranked candidates carry
  the score by hand, above the ones it kept."""
  by_hand = {name: SAVERS[name](str(tmp_path / name)) for name in SAVERS}
  queries, corpus, run = write_inputs(tmp_path)
  assert cli.main(["rerank", "--queries", queries, "--corpus", corpus, "--run", run, "--stage",
                   f"rankt5={tmp_path / 'rankt5'}@5", "--stage",
                   f"encoder={tmp_path / 'rankt5_encoder'}@3", "-o",
                   str(tmp_path / "cascade")]) == 0
  out = tmp_path / "cascade"
  for stage, before, family, depth in (("01_rankt5", "00_bm25", "rankt5", 5),
                                       ("02_encoder", "01_rankt5", "rankt5_encoder", 3)):
    previous = read_run(str(out / f"{before}.run"))
    stage_run = read_run(str(out / f"{stage}.run"))
    for q, query in QUERIES.items():
      assert len(previous[q]) == 6  # every stage keeps the candidates it did not rerank
      top = [d for d, _ in sorted(previous[q], key=lambda x: -x[1])[:depth]]
      scores = dict(stage_run[q])
      np.testing.assert_allclose([scores[d] for d in top], [by_hand[family](query, TEXTS[d])
                                                            for d in top], rtol=1e-5, atol=1e-5)
      ranked = sorted(scores, key=lambda d: -scores[d])
      assert set(ranked[:depth]) == set(top) and len(ranked) == 6  # the reranked on top, all kept


def test_pyterrier_reranks_a_frame_by_the_score_by_hand(model):
  pytest.importorskip("pyterrier")  # the `pyterrier` extra; the `test` extra installs it
  import pandas as pd

  from t5rank.pyterrier import Reranker

  _, path, by_hand = model
  frame = pd.DataFrame([{"qid": q, "query": query, "docno": d, "text": t, "score": float(-i)}
                        for q, query in QUERIES.items() for i, (d, t) in enumerate(TEXTS.items())])
  out = Reranker(path, **OPTIONS)(frame)
  for q, query in QUERIES.items():
    rows = out[out.qid == q]
    expected = {d: by_hand(query, t) for d, t in TEXTS.items()}
    assert rows.docno.tolist() == sorted(TEXTS, key=lambda d: -expected[d])
    np.testing.assert_allclose(rows.score, [expected[d] for d in rows.docno], rtol=1e-5, atol=1e-5)
    assert rows["rank"].tolist() == list(range(len(TEXTS)))
