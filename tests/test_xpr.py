"""The XPR construction (t5rank.data.xpr, `t5rank xpr`) on InsuranceQA's first test queries."""

import json
import os

import pytest

from t5rank import cli
from t5rank.data import xpr
from t5rank.data.insuranceqa import load_split


def test_document_ids_name_the_answer_and_its_language():
  assert xpr.doc_id("12345", "en") == "12345"
  assert xpr.doc_id("12345", "zh") == "12345:zh"
  assert xpr.answer_of("12345:zh") == ("12345", "zh")
  assert xpr.answer_of("12345") == ("12345", "en")
  with pytest.raises(ValueError, match="XPR languages"):
    xpr.doc_id("1", "de")


def test_each_query_is_one_language_and_half_of_each_pool_chinese():
  built = xpr.xpr_split("test", seed=0, num_queries=20)
  en, zh = load_split("test", "en", 20), load_split("test", "zh", 20)
  assert list(built.queries) == list(en.queries)
  for qid, language in built.query_language.items():
    assert built.queries[qid] == (en if language == "en" else zh).queries[qid]
    pool = built.pools[qid]
    answers = [xpr.answer_of(d) for d in pool]
    assert [aid for aid, _ in answers] == en.pools[qid]  # the same candidates, in the same order
    assert sum(lang == "zh" for _, lang in answers) == len(pool) // 2
    assert sorted(xpr.answer_of(d)[0] for d in built.relevant[qid]) == sorted(en.relevant[qid])
    assert set(built.relevant[qid]) <= set(pool)  # relevant under the id its pool holds
    for d in pool:
      aid, lang = xpr.answer_of(d)
      assert built.documents[d] == (en if lang == "en" else zh).answers[aid]
  assert set(built.query_language.values()) == {"en", "zh"}  # 20 coins: both sides (p = 1 - 2^-19)
  assert len(built.documents) == 2 * len(en.answers)


def test_seeded_per_query_and_independent_of_how_many_queries_are_built():
  a = xpr.xpr_split("test", seed=0, num_queries=12)
  b = xpr.xpr_split("test", seed=0, num_queries=5)
  assert all(a.pools[q] == b.pools[q] and a.query_language[q] == b.query_language[q] for q in b.pools)
  c = xpr.xpr_split("test", seed=1, num_queries=12)
  assert any(a.pools[q] != c.pools[q] for q in a.pools)
  # validation draws its own coins: the same query id in another split is another stream
  assert xpr.query_rng("test", 0, "7").random() != xpr.query_rng("validation", 0, "7").random()


def test_the_command_writes_a_ranking_job(tmp_path, capsys):
  out = str(tmp_path / "xpr")
  assert cli.main(["xpr", "--split", "test", "--seed", "3", "--queries", "4", "--output", out]) == 0
  assert "Chinese queries" in capsys.readouterr().out
  with open(os.path.join(out, "xpr.json"), encoding="utf-8") as f:
    meta = json.load(f)
  built = xpr.xpr_split("test", seed=3, num_queries=4)
  assert (meta["split"], meta["seed"], meta["num_queries"]) == ("test", 3, 4)
  assert meta["query_language"] == built.query_language
  assert meta["counts"]["queries_en"] + meta["counts"]["queries_zh"] == 4
  assert meta["counts"]["candidates_zh"] == sum(len(p) // 2 for p in built.pools.values())
  with open(os.path.join(out, "qrels.txt")) as f:
    qrels = [line.split() for line in f]
  assert sorted((q, d) for q, _, d, _ in qrels) == sorted(
      (q, d) for q, docs in built.relevant.items() for d in docs)
  with open(os.path.join(out, "pool.run")) as f:
    run = [line.split() for line in f]
  assert [(q, d) for q, _, d, *_ in run] == [(q, d) for q, pool in built.pools.items() for d in pool]
  with open(os.path.join(out, "queries.tsv"), encoding="utf-8") as f:
    assert dict(line.rstrip("\n").split("\t") for line in f) == built.queries
