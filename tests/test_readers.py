"""Readers on literal rows: every accepted format, and the errors a user sees for each bad line."""

from __future__ import annotations

import gzip
import logging
import os

import pytest

from t5rank.data.readers import (Document, InputFormatError, read_corpus, read_qrels, read_queries,
                            read_run, write_run)


def _write(tmp_path, name: str, content: str | bytes) -> str:
  path = os.path.join(tmp_path, name)
  data = content.encode("utf-8") if isinstance(content, str) else content
  with open(path, "wb") as f:
    f.write(data)
  return path


def test_queries_tsv_and_jsonl_keys(tmp_path):
  tsv = _write(tmp_path, "q.tsv", "1\twhat is term life?\n\n2\t保险 可以 取消 吗？\r\n")
  assert read_queries(tsv) == {"1": "what is term life?", "2": "保险 可以 取消 吗？"}
  jsonl = _write(tmp_path, "q.jsonl",
                 '{"id": "a", "text": "x"}\n{"qid": 7, "query": "y"}\n'
                 '{"_id": "c", "text": "z"}\n{"query_id": "d", "query": "w"}\n')
  assert read_queries(jsonl) == {"a": "x", "7": "y", "c": "z", "d": "w"}


@pytest.mark.parametrize("content, expected", [
    ("1\tok\n2\tthree\tcolumns\n",
     r"q.tsv:2: expected 2 tab-separated columns \(qid, text\), got 3 column\(s\)"),
    ("1\tok\n\tno id\n", "q.tsv:2: empty query id"),
    ("1\tok\n2\t  \n", "q.tsv:2: empty query text for query '2'"),
    ("1\tok\n1\tagain\n", "q.tsv:2: duplicate query id '1'"),
])
def test_queries_errors_name_file_and_line(tmp_path, content, expected):
  path = _write(tmp_path, "q.tsv", content)
  with pytest.raises(InputFormatError, match=expected) as error:
    read_queries(path)
  assert str(error.value).startswith(path)


def test_queries_jsonl_errors(tmp_path):
  path = _write(tmp_path, "q.jsonl", '{"id": "a", "text": "x"}\n{"id": "b", "text": \n')
  with pytest.raises(InputFormatError, match=r"q.jsonl:2: bad JSON"):
    read_queries(path)
  path = _write(tmp_path, "q.jsonl", '{"id": "a", "body": "x"}\n')
  with pytest.raises(InputFormatError, match=r"q.jsonl:1: no query text key; expected one of "
                     r"\['text', 'query'\], found \['body', 'id'\]"):
    read_queries(path)


def test_undecodable_bytes(tmp_path):
  path = _write(tmp_path, "q.tsv", b"1\tgood\n2\tbad \xff byte\n")
  with pytest.raises(InputFormatError, match=r"q.tsv:2: undecodable bytes \(expected UTF-8\) at byte 6"):
    read_queries(path)


def test_skip_bad_skips_and_logs(tmp_path, caplog):
  path = _write(tmp_path, "q.tsv", b"1\tgood\n2\tbad \xff\n3\n4\tfine\n")
  with caplog.at_level(logging.WARNING):
    assert read_queries(path, skip_bad=True) == {"1": "good", "4": "fine"}
  assert "skipped 2 malformed line(s)" in caplog.text


def test_corpus_formats_keep_empty_documents(tmp_path):
  tsv = _write(tmp_path, "c.tsv", "d1\tSome text.\n d2 \t\nd3\tBody\tTitle\n")
  assert read_corpus(tsv) == {"d1": Document("Some text."), " d2 ": Document(""),
                              "d3": Document("Body", "Title")}
  jsonl = _write(tmp_path, "c.jsonl",
                 '{"docid": "a", "contents": "x", "title": "T"}\n{"_id": "b", "body": ""}\n'
                 '{"doc_id": 3, "text": "z"}\n')
  assert read_corpus(jsonl) == {"a": Document("x", "T"), "b": Document(""), "3": Document("z")}


def test_corpus_gzip(tmp_path):
  path = os.path.join(tmp_path, "c.jsonl.gz")
  with gzip.open(path, "wt", encoding="utf-8") as f:
    f.write('{"id": "a", "text": "x"}\n')
  assert read_corpus(path) == {"a": Document("x")}


def _bad_gzips(tmp_path, text: str) -> dict[str, str]:
  """`text` gzipped four wrong ways: not gzip at all, cut short, a corrupt first deflate block
  header (byte 10, after gzip's 10-byte header: 0xFF is the reserved block type 11), a wrong CRC."""
  data = gzip.compress(text.encode("utf-8"))
  return {"not gzip": _write(tmp_path, "plain.tsv.gz", text),
          "cut short": _write(tmp_path, "cut.tsv.gz", data[:len(data) // 2]),
          "corrupt": _write(tmp_path, "corrupt.tsv.gz", data[:10] + b"\xff" + data[11:]),
          "wrong CRC": _write(tmp_path, "crc.tsv.gz",
                              data[:-8] + bytes([data[-8] ^ 0xFF]) + data[-7:])}


@pytest.mark.parametrize("reader, line", [
    (read_queries, "q{i}\tquery {i} about life insurance {j}\n"),
    (read_corpus, "d{i}\tdocument {i} about annuities and term life {j}\n"),
    (read_run, "q{i} Q0 d{j} {i} {j}.5 bm25\n"),
    (read_qrels, "q{i} 0 d{j} 1\n"),
])
def test_a_corrupt_gzip_input_is_one_error_naming_the_file(tmp_path, reader, line):
  # #58: gzip's own error (or EOFError, zlib.error: a traceback) named no file
  text = "".join(line.format(i=i, j=(i * 7919) % 1000) for i in range(2000))
  for case, path in _bad_gzips(tmp_path, text).items():
    with pytest.raises(InputFormatError, match=rf"^{path}: unreadable gzip data after \d+ "
                       r"line\(s\) \(.+\): the file is cut short, corrupt, or not gzip despite "
                       r"its \.gz name$"):
      reader(path)


def test_corrupt_gzip_topics_and_the_cli(tmp_path, capsys):
  from t5rank import cli
  from t5rank.data.readers import read_trec_topics

  path = _write(tmp_path, "topics.gz", b"<top> <num> 301 <title> x </top>")
  with pytest.raises(InputFormatError, match=rf"^{path}: unreadable gzip data after 0 line\(s\) "
                     r"\(Not a gzipped file"):
    read_trec_topics(path)
  run = _write(tmp_path, "run.trec", "q1 Q0 d1 1 2.0 x\n")
  with pytest.raises(SystemExit, match=rf"^t5rank evaluate: {path}: unreadable gzip data"):
    cli.main(["evaluate", "--qrels", path, run])


def test_corpus_errors(tmp_path):
  path = _write(tmp_path, "c.tsv", "a\tx\nb\n")
  with pytest.raises(InputFormatError,
                     match=r"c.tsv:2: expected 2 or 3 tab-separated columns \(id, text\[, title\]\)"):
    read_corpus(path)
  path = _write(tmp_path, "c.jsonl", '{"id": "a", "text": ["x"]}\n')
  with pytest.raises(InputFormatError, match="c.jsonl:1: document text key 'text' must be a string"):
    read_corpus(path)
  path = _write(tmp_path, "c.jsonl", '{"id": "a", "text": "x"}\n["a", "x"]\n')
  with pytest.raises(InputFormatError, match="c.jsonl:2: expected a JSON object, got list"):
    read_corpus(path)


def test_qrels(tmp_path):
  path = _write(tmp_path, "qrels", "1 0 d1 1\n1 0 d2 0\n2\t0\td3\t2\n")
  assert read_qrels(path) == {"1": {"d1": 1, "d2": 0}, "2": {"d3": 2}}
  path = _write(tmp_path, "qrels", "1 0 d1 yes\n")
  with pytest.raises(InputFormatError, match="qrels:1: relevance must be an integer, got 'yes'"):
    read_qrels(path)
  path = _write(tmp_path, "qrels", "1 0 d1\n")
  with pytest.raises(InputFormatError, match=r"qrels:1: expected 4 columns \(qid 0 docid relevance\)"):
    read_qrels(path)


def test_run_formats_keep_file_order(tmp_path):
  trec = _write(tmp_path, "run", "1 Q0 d2 1 12.5 bm25\n1 Q0 d1 2 13.0 bm25\n2 Q0 d9 1 -1 bm25\n")
  assert read_run(trec) == {"1": [("d2", 12.5), ("d1", 13.0)], "2": [("d9", -1.0)]}
  pairs = _write(tmp_path, "pairs.tsv", "1\td2\n1\td1\n2 d9\n")
  assert read_run(pairs) == {"1": [("d2", -1.0), ("d1", -2.0)], "2": [("d9", -1.0)]}


def test_run_errors(tmp_path):
  path = _write(tmp_path, "run", "1 Q0 d1 1 1.0 t\n1 Q0 d1 2 0.5 t\n")
  with pytest.raises(InputFormatError, match="run:2: document 'd1' appears twice for query '1'"):
    read_run(path)
  path = _write(tmp_path, "run", "1 Q0 d1 1 high t\n")
  with pytest.raises(InputFormatError, match="run:1: rank must be an integer and score a number"):
    read_run(path)
  path = _write(tmp_path, "run", "1 Q0 d1 1 1.0\n")
  with pytest.raises(InputFormatError, match=r"run:1: expected 6 columns .* or 2 columns"):
    read_run(path)


def test_write_run_round_trips_exactly(tmp_path):
  run = {"q2": [("b", 0.1 + 0.2), ("a", -3.0)], "q1": [("c", 1e-300)]}
  path = os.path.join(tmp_path, "out.run")
  write_run(path, run, "t5rank")
  with open(path) as f:
    assert f.readline() == "q2 Q0 b 1 0.30000000000000004 t5rank\n"
  assert read_run(path) == run
  assert os.listdir(tmp_path) == ["out.run"]  # no temporary file left behind


def test_write_run_failure_leaves_nothing(tmp_path):
  path = os.path.join(tmp_path, "out.run")
  with pytest.raises(ValueError, match="run tag"):
    write_run(path, {"q": [("d", 1.0)]}, "two words")
  assert os.listdir(tmp_path) == []
