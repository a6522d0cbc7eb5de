"""A model is one module (#68 item 2): a toy reranker defined in tests/plugins/toy_overlap.py only,
registered through the public API, scores through `t5rank score`, `t5rank.load` and `t5rank
serve` with nothing in t5rank/ naming it; the service reads what its score means from its class.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import requests

PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins")
QUERY = "does car insurance cover theft"
DOCUMENTS = ["Car insurance covers theft of the car.",  # car, insurance, theft, cover? no: covers
             "Life insurance pays a death benefit.",  # insurance
             "Theft is not covered here."]  # theft
WEIGHT = 1.5
# overlaps by hand: {car, insurance, theft} = 3; {insurance} = 1; {theft} = 1
EXPECTED = [3 * WEIGHT, 1 * WEIGHT, 1 * WEIGHT]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
  sys.path.insert(0, PLUGINS)
  try:
    import toy_overlap
  finally:
    sys.path.remove(PLUGINS)
  from t5rank.checkpoints import native

  path = str(tmp_path_factory.mktemp("toy") / "model")
  native.save_checkpoint(path, {"weight": np.float32(WEIGHT)}, toy_overlap.OverlapConfig(),
                         extra_metadata={"model": "toy_overlap"})
  yield path
  from t5rank.models import registry  # the tests after these see t5rank's own families only

  registry._FAMILIES.pop("toy_overlap", None)
  sys.modules.pop("toy_overlap", None)


def test_the_family_is_found_by_name_and_states_its_capabilities(toy):
  from t5rank.models import registry

  family = registry.get("toy_overlap")
  assert family.reranker.log_probability is False and family.trainable is None
  assert "toy_overlap" in registry.names()
  assert registry.for_config(family.config()) is family


def test_t5rank_load_ranks_with_the_toy(toy):
  import t5rank

  ranker = t5rank.load(toy)
  assert ranker.family == "toy_overlap"
  ranked = ranker.rank(QUERY, DOCUMENTS)
  assert [r["corpus_id"] for r in ranked] == [0, 1, 2]  # ties in input order
  np.testing.assert_allclose([r["score"] for r in ranked], EXPECTED)


def test_t5rank_score_finds_the_toy_through_the_environment(toy, tmp_path):
  (tmp_path / "q.tsv").write_text(f"q1\t{QUERY}\n")
  (tmp_path / "c.tsv").write_text("".join(f"d{i}\t{t}\n" for i, t in enumerate(DOCUMENTS)))
  (tmp_path / "r.run").write_text("".join(f"q1 Q0 d{i} {i + 1} {-i} bm25\n" for i in range(3)))
  env = {**os.environ, "T5RANK_MODELS": "toy_overlap", "JAX_PLATFORMS": "cpu",
         "PYTHONPATH": os.pathsep.join(filter(None, [PLUGINS, os.environ.get("PYTHONPATH")]))}
  result = subprocess.run(
      [sys.executable, "-m", "t5rank.cli", "score", "--checkpoint", toy, "--queries",
       str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
       str(tmp_path / "r.run"), "--window", "0", "-o", str(tmp_path / "out.run")],
      capture_output=True, text=True, env=env, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  lines = [line.split() for line in (tmp_path / "out.run").read_text().splitlines()]
  assert [line[2] for line in lines] == ["d0", "d1", "d2"]
  np.testing.assert_allclose([float(line[4]) for line in lines], EXPECTED)
  assert lines[0][5] == "toy_overlap"
  unknown = subprocess.run(
      [sys.executable, "-m", "t5rank.cli", "score", "--checkpoint", toy, "--queries",
       str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
       str(tmp_path / "r.run"), "-o", str(tmp_path / "out2.run")],
      capture_output=True, text=True, env={**env, "T5RANK_MODELS": "no_such_module"}, timeout=300)
  assert unknown.returncode != 0
  assert "T5RANK_MODELS names 'no_such_module', which cannot be imported" in unknown.stderr


def test_t5rank_serve_answers_with_the_toys_scores(toy):
  import t5rank
  from test_serve import Running

  running = Running(t5rank.load(toy), max_wait_ms=1)
  try:
    running.wait_ready()
    answer = requests.post(running.url + "/rerank", json={"query": QUERY, "texts": DOCUMENTS,
                                                          "raw_scores": True}).json()
    assert [a["index"] for a in answer] == [0, 1, 2]
    np.testing.assert_allclose([a["score"] for a in answer], EXPECTED)
    normalized = requests.post(running.url + "/rerank",
                               json={"query": QUERY, "texts": DOCUMENTS}).json()
    # not a log-probability: the service's normalized score is the sigmoid of the toy's
    np.testing.assert_allclose([a["score"] for a in normalized],
                               1 / (1 + np.exp(-np.asarray(EXPECTED))), rtol=1e-6)
    info = requests.get(running.url + "/info").json()
    assert info["family"] == "toy_overlap" and "log P" not in str(info.get("score", ""))
  finally:
    running.stop()
