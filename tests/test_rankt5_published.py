"""RankT5 as it is published (#70 item 3), read and scored equal to the computation of the framework
it came from: tests/golden/hf_rankt5 (scripts/make_hf_goldens.py rankt5) is a tiny T5 v1.0 with
T5's vocabulary saved by transformers in the files of the Hub's RankT5 uploads
(Soyoung97/RankT5-base, -large, -3b: config.json, pytorch_model.bin), with transformers' logit of
<extra_id_10> (32089) at the first decoder step of `Query: q Document: d` (no EOS) for four pairs. The same weights in the layout of
Google's t5x checkpoints (gs://t5-data/pretrained_models/t5x/rankt5/*/checkpoint_N: msgpack and
zarr) give the same scores. No network: the Hub's cache is written here."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from test_checkpoints import write_t5x  # noqa: E402  (tests/ is on the path: the t5x writer)

import t5rank
from t5rank import cli
from t5rank.data.readers import read_run
from t5rank.models.t5_weights import load_checkpoint
from t5rank.models.vocab import DEFAULT_SPM_PATH
from t5rank.testing import make_hub_cache

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "hf_rankt5")
REPO = "Soyoung97/RankT5-base"
ATOL = 1e-5  # as tests/test_hf_numerics.py

with open(os.path.join(GOLDEN, "reference.json")) as _f:
  REFERENCE = json.load(_f)
PAIRS = REFERENCE["pairs"]


def test_the_golden_is_a_t5_v1_0_with_t5s_vocabulary_and_scores_that_differ():
  config, _ = load_checkpoint(GOLDEN)  # T5 1.0, as Google's RankT5: relu, the embedding tied
  assert (config.vocab_size, config.feed_forward, config.tie_embeddings) == (32128, "relu", True)
  assert REFERENCE["score_id"] == 32089
  assert os.path.isfile(os.path.join(GOLDEN, "pytorch_model.bin"))
  assert np.ptp([p["score"] for p in PAIRS]) > 0.1  # a wrong weight or token would show


def scores_of(ranker) -> list[float]:
  """Each golden pair's score from `ranker.rank`, in the golden's order."""
  out = []
  for pair in PAIRS:
    (ranked,) = ranker.rank(pair["query"], [pair["document"]])
    out.append(ranked["score"])
  return out


def test_a_hub_conversion_from_the_cache_scores_transformers_logits(tmp_path, monkeypatch):
  cache = tmp_path / "hub"
  files = {name: os.path.join(GOLDEN, name)
           for name in ("config.json", "generation_config.json", "pytorch_model.bin")}
  files["spiece.model"] = DEFAULT_SPM_PATH  # T5's, as the uploads' file of its size
  make_hub_cache(str(cache), REPO, files)
  monkeypatch.setenv("HF_HUB_CACHE", str(cache))
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  ranker = t5rank.load(REPO, reranker="rankt5")  # its files do not say RankT5: named
  assert ranker.family == "rankt5"
  assert ranker.reranker.encode([p["query"] for p in PAIRS],
                                [p["document"] for p in PAIRS]) == [p["ids"] for p in PAIRS]
  np.testing.assert_allclose(scores_of(ranker), [p["score"] for p in PAIRS], rtol=0, atol=ATOL)
  # one query, three documents: ranked by transformers' logits
  first = [p for p in PAIRS if p["query"] == PAIRS[0]["query"]]
  ranked = ranker.rank(first[0]["query"], [p["document"] for p in first])
  assert [r["corpus_id"] for r in ranked] == list(np.argsort([-p["score"] for p in first]))


@pytest.fixture
def googles_layout(tmp_path, monkeypatch):
  """The golden's weights as t5x wrote Google's RankT5 (`base/checkpoint_1049900/`: the msgpack
  `checkpoint` and zarr arrays), with its size registered as a config name, as `t5_base` is."""
  from t5rank.models import config as configs

  golden_config, params = load_checkpoint(GOLDEN)
  write_t5x(str(tmp_path / "base" / "checkpoint_1049900"), params)
  monkeypatch.setitem(configs.CONFIGS, "t5_golden", golden_config)
  return str(tmp_path / "base" / "checkpoint_1049900")


def test_googles_t5x_layout_scores_transformers_logits(googles_layout):
  ranker = t5rank.load(googles_layout, reranker="rankt5", config="t5_golden")
  np.testing.assert_allclose(scores_of(ranker), [p["score"] for p in PAIRS], rtol=0, atol=ATOL)


def test_t5rank_score_on_googles_layout_writes_transformers_logits(googles_layout, tmp_path):
  """The command docs/public_models.md gives: --reranker rankt5 --config, --window 0."""
  queries = sorted({p["query"] for p in PAIRS})
  qid = {q: f"q{i}" for i, q in enumerate(queries)}
  (tmp_path / "q.tsv").write_text("".join(f"{qid[q]}\t{q}\n" for q in queries))
  (tmp_path / "c.tsv").write_text("".join(f"d{i}\t{p['document']}\n" for i, p in enumerate(PAIRS)))
  (tmp_path / "r.run").write_text("".join(f"{qid[p['query']]} Q0 d{i} {i + 1} {-i} bm25\n"
                                          for i, p in enumerate(PAIRS)))
  assert cli.main(["score", "--checkpoint", googles_layout, "--reranker", "rankt5", "--config",
                   "t5_golden", "--queries", str(tmp_path / "q.tsv"), "--corpus",
                   str(tmp_path / "c.tsv"), "--run", str(tmp_path / "r.run"), "--window", "0",
                   "-o", str(tmp_path / "out.run")]) == 0
  run = read_run(str(tmp_path / "out.run"))
  got = [dict(run[qid[p["query"]]])[f"d{i}"] for i, p in enumerate(PAIRS)]
  np.testing.assert_allclose(got, [p["score"] for p in PAIRS], rtol=0, atol=ATOL)
