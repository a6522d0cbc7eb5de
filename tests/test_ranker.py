"""The Python front door (`t5rank.load(...).rank/predict`): its scores are `t5rank score`'s on the
same pairs, for each family; parameters are placed once and a call of seen shapes compiles
nothing; errors a notebook user can act on."""

from __future__ import annotations

import logging

import jax
import numpy as np
import pytest

import t5rank
from t5rank import cli
from t5rank.data.readers import read_run
from t5rank.testing import SAMPLE_BM25, SAMPLE_DOCUMENTS, SAMPLE_QUERY

QUERY, DOCUMENTS, BM25 = SAMPLE_QUERY, list(SAMPLE_DOCUMENTS), list(SAMPLE_BM25)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  root = tmp_path_factory.mktemp("ranker")
  (root / "q.tsv").write_text(f"q\t{QUERY}\n")
  (root / "c.tsv").write_text("".join(f"{i}\t{d}\n" for i, d in enumerate(DOCUMENTS)))
  order = sorted(range(len(BM25)), key=lambda i: -BM25[i])
  (root / "bm25.run").write_text("".join(f"q Q0 {i} {r + 1} {BM25[i]!r} bm25\n"
                                         for r, i in enumerate(order)))
  return root


@pytest.mark.parametrize("name, depth", [("monot5", None), ("duot5", 4), ("tk", None),
                                         ("dual_encoder", None)])
def test_rank_gives_the_scores_of_t5rank_score(files, name, depth):
  out = files / f"{name}.run"
  argv = ["score", "--checkpoint", f"shipped:{name}", "--queries", str(files / "q.tsv"),
          "--corpus", str(files / "c.tsv"), "--run", str(files / "bm25.run"), "--window", "0",
          "-o", str(out)] + (["--depth", str(depth)] if depth else [])
  assert cli.main(argv) == 0
  expected = [(int(d), s) for d, s in read_run(str(out))["q"]]
  ranker = t5rank.load(f"shipped:{name}", depth=depth)
  order = sorted(range(len(BM25)), key=lambda i: -BM25[i])  # the run's ranking: depth cuts it
  ranked = ranker.rank(QUERY, [DOCUMENTS[i] for i in order],
                       first_stage_scores=[BM25[i] for i in order], return_documents=True)
  for r in ranked:
    r["corpus_id"] = order[r["corpus_id"]]
    r["text"] = DOCUMENTS[r["corpus_id"]]
  assert [r["corpus_id"] for r in ranked] == [d for d, _ in expected]
  np.testing.assert_allclose([r["score"] for r in ranked], [s for _, s in expected], rtol=0,
                             atol=1e-5)
  top2 = ranker.rank(QUERY, [DOCUMENTS[i] for i in order],
                     first_stage_scores=[BM25[i] for i in order], top_k=2)
  assert [(order[r["corpus_id"]], r["score"]) for r in top2] == [
      (r["corpus_id"], r["score"]) for r in ranked[:2]]


def test_predict_scores_each_pair_as_score_does(files):
  ranker = t5rank.load("shipped:monot5")
  scores = ranker.predict([(QUERY, d) for d in DOCUMENTS], first_stage_scores=BM25)
  expected = dict(read_run(str(files / "monot5.run"))["q"]) if (files / "monot5.run").exists() \
      else None
  ranked = {r["corpus_id"]: r["score"] for r in ranker.rank(QUERY, DOCUMENTS,
                                                             first_stage_scores=BM25)}
  np.testing.assert_allclose(scores, [ranked[i] for i in range(len(DOCUMENTS))], atol=1e-5)
  if expected:
    np.testing.assert_allclose(scores, [expected[str(i)] for i in range(len(DOCUMENTS))],
                               atol=1e-5)


def test_a_second_call_of_the_same_shapes_compiles_nothing(caplog):
  ranker = t5rank.load("shipped:tk")
  ranker.rank(QUERY, DOCUMENTS)
  jax.config.update("jax_log_compiles", True)
  try:
    with caplog.at_level(logging.DEBUG):
      again = ranker.rank(QUERY, list(reversed(DOCUMENTS)))
    compiled = [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]
    caplog.clear()
    with caplog.at_level(logging.DEBUG):  # the check can fail: a new shape compiles
      ranker.rank(QUERY, [d * 12 for d in DOCUMENTS])
    longer = [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]
  finally:
    jax.config.update("jax_log_compiles", False)
  assert compiled == [], compiled
  assert longer
  assert len(again) == len(DOCUMENTS)


def test_errors_say_what_to_do():
  mono = t5rank.load("shipped:monot5")
  assert "Ranker(monot5" in repr(mono) and "shipped:monot5" in repr(mono)
  with pytest.raises(ValueError, match="pass first_stage_scores"):
    mono.rank(QUERY, DOCUMENTS)
  with pytest.raises(ValueError, match="2 scores for 6 texts"):
    mono.rank(QUERY, DOCUMENTS, first_stage_scores=[1.0, 2.0])
  with pytest.raises(ValueError, match="use rank"):
    t5rank.load("shipped:duot5").predict([(QUERY, DOCUMENTS[0])])
  with pytest.raises(ValueError, match="a list of document strings"):
    mono.rank(QUERY, "one string")
  with pytest.raises(ValueError, match="is a monot5 checkpoint"):
    t5rank.load("shipped:monot5", reranker="duot5")
  assert mono.rank(QUERY, [], first_stage_scores=[]) == []


def test_the_python_example_of_docs_public_models_runs():
  """docs/public_models.md's monoT5 then duoT5 example as printed, on tests/golden/hf_duot5 (a
  tiny T5 with T5's vocabulary) for castorini's two models, `...` for your pairs: duoT5's
  corpus_id indexes `hits`, and `final` indexes `passages`."""
  import os
  import re

  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with open(os.path.join(root, "docs", "public_models.md"), encoding="utf-8") as f:
    text = f.read()
  code = re.search(r"```python\n(.*?)```", text[text.index("\n## From Python\n"):], re.S).group(1)
  tiny = os.path.join(root, "tests", "golden", "hf_duot5")
  code = (code.replace("castorini/monot5-base-msmarco-10k", tiny)
          .replace("castorini/duot5-base-msmarco", tiny).replace(", ...])", "])"))
  passages = [f"{d} ({i})" for i, d in enumerate(DOCUMENTS * 2)]
  variables = {"passages": passages}
  exec(compile(code, "docs/public_models.md", "exec"), variables)
  hits, best, final = variables["hits"], variables["best"], variables["final"]
  assert len(hits) == 10 and len(best) == 10
  assert [passages[i] for i in final] == [hits[r["corpus_id"]]["text"] for r in best]
