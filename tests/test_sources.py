"""Triple sources on literal files: formats, bad lines, the seeded triple stream, data-poor samples."""

import logging

import numpy as np
import pytest

from t5rank.data import sources
from t5rank.data.readers import InputFormatError


def _write(tmp_path, name, text, mode="w"):
  path = tmp_path / name
  if mode == "wb":
    path.write_bytes(text)
  else:
    path.write_text(text, encoding="utf-8")
  return str(path)


def test_read_triples_tsv(tmp_path):
  path = _write(tmp_path, "triples.tsv", "q1\tp1\tn1\nq1\tp1\tn2\n\nq2\tp2\tn1\n")
  table = sources.read_triples_tsv(path)
  assert list(table.triples(shuffle=False, num_epochs=1)) == [
      ("q1", "p1", "n1"), ("q1", "p1", "n2"), ("q2", "p2", "n1")]
  assert table.queries == ["q1", "q2"] and table.documents == ["p1", "n1", "n2", "p2"]
  assert len(sources.read_triples_tsv(path, max_triples=2)) == 2


@pytest.mark.parametrize("content,message", [
    ("q1\tp1\tn1\nq2\tp2\n", r"triples.tsv:2: expected 3 tab-separated columns .* got 2"),
    ("q1\tp1\tn1\n\tp2\tn2\n", r"triples.tsv:2: empty query"),
    (b"q1\tp1\tn1\nq2\t\xff\tn2\n", r"triples.tsv:2: undecodable bytes"),
])
def test_read_triples_tsv_bad_lines(tmp_path, caplog, content, message):
  path = _write(tmp_path, "triples.tsv", content, "wb" if isinstance(content, bytes) else "w")
  with pytest.raises(InputFormatError, match=message):
    sources.read_triples_tsv(path)
  with caplog.at_level(logging.WARNING):
    assert len(sources.read_triples_tsv(path, skip_bad=True)) == 1
  assert "skipped 1 malformed line(s)" in caplog.text


def test_read_qidpid_triples(tmp_path):
  queries = _write(tmp_path, "queries.tsv", "1\twhat is a deductible\n2\tcar cover\n")
  collection = _write(tmp_path, "collection.tsv", "10\tyou pay first\n11\tcars\n12\tboats\n")
  triples = _write(tmp_path, "qidpid.tsv", "1\t10\t11\n2\t11\t12\n2\t11\t99\n")
  with pytest.raises(InputFormatError, match=r"qidpid.tsv:3: unknown passage id '99'"):
    sources.read_qidpid_triples(triples, queries, collection)
  table = sources.read_qidpid_triples(triples, queries, collection, skip_bad=True)
  assert list(table.triples(shuffle=False, num_epochs=1)) == [
      ("what is a deductible", "you pay first", "cars"), ("car cover", "cars", "boats")]


def _generic_files(tmp_path, qrels="q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n"):
  return dict(
      queries_path=_write(tmp_path, "queries.jsonl",
                          '{"id": "q1", "text": "first"}\n{"id": "q2", "text": "second"}\n'),
      corpus_path=_write(tmp_path, "corpus.tsv", "d1\tone\tT1\nd2\ttwo\nd3\tthree\nd4\tfour\n"),
      qrels_path=_write(tmp_path, "qrels.txt", qrels),
      run_path=_write(tmp_path, "run.txt", "q1 Q0 d1 1 9 r\nq1 Q0 d2 2 8 r\nq1 Q0 d4 3 7 r\n"
                                           "q2 Q0 d3 1 9 r\nq2 Q0 d1 2 8 r\n"))


def test_generic_triples_draw_negatives_from_non_relevant_run_candidates(tmp_path):
  table = sources.read_generic_triples(**_generic_files(tmp_path))
  seen = {t for epoch in range(20) for t in table.triples(seed=epoch, num_epochs=1)}
  assert seen == {("first", "T1 one", "two"), ("first", "T1 one", "four"),
                  ("second", "three", "T1 one")}
  assert len(table) == 2  # two positives per epoch
  depth1 = sources.read_generic_triples(**_generic_files(tmp_path), depth=2)
  assert {t[2] for t in depth1.triples(num_epochs=3)} <= {"two", "T1 one"}


def test_generic_triples_unknown_id_names_the_line(tmp_path, caplog):
  files = _generic_files(tmp_path, qrels="q1 0 d1 1\nq2 0 d9 1\n")
  with pytest.raises(InputFormatError, match=r"qrels.txt:2: unknown document id 'd9'"):
    sources.read_generic_triples(**files)
  with caplog.at_level(logging.WARNING):
    table = sources.read_generic_triples(**files, skip_bad=True)
  assert "skipped 1 line(s) with unknown ids" in caplog.text
  assert len(table) == 1


def _table(n_queries=5, per_query=2):
  records = {str(q): {"en": f"q{q}", "zh": f"问{q}", "answers": [str(q * 10 + a) for a in range(
      per_query)], "negatives": [str(100 + q * 10 + k) for k in range(3)] + [str(q * 10)]}
      for q in range(n_queries)}
  answers = {str(a): {"en": f" a{a}", "zh": f"答{a}"} for a in range(1000)}
  return sources.insuranceqa_table(records, answers, "en")


def test_insuranceqa_table_excludes_relevant_answers_from_negatives():
  table = _table()
  assert len(table) == 10
  triples = list(table.triples(shuffle=False, num_epochs=1))
  assert triples[:2] == [("q0", "a0", triples[0][2]), ("q0", "a1", triples[1][2])]
  for query, positive, negative in table.triples(seed=3, num_epochs=5):
    q = int(query[1:])
    assert negative in {f"a{100 + q * 10 + k}" for k in range(3)}


def test_triple_stream_is_seeded_resumable_and_sharded():
  table = _table()
  stream = list(table.triples(seed=7, num_epochs=3))
  assert len(stream) == 30
  assert stream == list(table.triples(seed=7, num_epochs=3))
  assert stream != list(table.triples(seed=8, num_epochs=3))
  assert stream[:10] != stream[10:20]  # reshuffled each epoch
  assert sorted(p for _, p, _ in stream[:10]) == sorted(p for _, p, _ in stream[10:20])
  assert list(table.triples(seed=7, start=13, num_epochs=3)) == stream[13:]
  shards = [list(table.triples(seed=7, start=4, num_epochs=3, shard_index=i, num_shards=2))
            for i in range(2)]
  assert shards[0] == stream[4::2] and shards[1] == stream[5::2]


def test_subsample_is_n_positives_and_n_negatives_fixed_by_seed():
  table = _table(n_queries=50)
  small = table.subsample(8, seed=1)
  assert len(small) == 8
  one, two = (sorted(small.triples(seed=s, num_epochs=1)) for s in (0, 5))
  assert one == two  # the same 8 triples every epoch, only their order changes
  assert len({(q, p) for q, p, _ in one}) == 8
  assert sorted(table.subsample(8, seed=1).triples(num_epochs=1)) == one
  assert sorted(table.subsample(8, seed=2).triples(num_epochs=1)) != one
  with pytest.raises(ValueError, match="cannot sample"):
    table.subsample(101, seed=0)


def test_insuranceqa_package_validation_split():
  table = sources.insuranceqa("validation", "zh")
  assert len(table.queries) == 2000
  assert len(table) >= 2000
  assert np.all(np.diff(table.pool_starts) > 0)
  query, positive, negative = next(table.triples(shuffle=False))
  assert query == "医疗保险拿起公司支付吗？" and positive and negative != positive


def test_msmarco_path_must_be_configured(monkeypatch):
  monkeypatch.delenv("MSMARCO_TRIPLES", raising=False)
  with pytest.raises(ValueError, match="MSMARCO_TRIPLES"):
    sources.msmarco_passage_triples()
