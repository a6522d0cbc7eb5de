"""Readers for the files a ranking job reads (queries, corpus, qrels, runs) and an atomic run writer.

Formats (each file is UTF-8, optionally gzipped when its name ends in `.gz`; blank lines are skipped):
- queries: TSV `qid<TAB>text`, or JSONL with an id key (`id`, `qid`, `_id`, `query_id`) and a text
  key (`text`, `query`).
- corpus: TSV `id<TAB>text[<TAB>title]`, or JSONL with an id key (`id`, `docid`, `_id`, `doc_id`),
  a text key (`text`, `contents`, `body`) and an optional `title`. Empty text is allowed.
- qrels: TREC `qid 0 docid relevance`, whitespace-separated.
- runs: TREC `qid Q0 docid rank score tag`, or two columns `qid docid` (whitespace or tab).
- TREC topics (`read_trec_topics`): `<top>` blocks with `<num>`, `<title>`, `<desc>`, `<narr>`, as
  Robust04's topic file has them.

A JSONL file is recognized by its first non-blank line starting with `{`. A malformed line raises
`InputFormatError` naming the file, the line and what was expected; with `skip_bad=True` such lines
are skipped and their count is logged instead. A `.gz` file that is not gzip, or whose gzip data is
corrupt or cut short, raises `InputFormatError` naming the file and the lines read before.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import logging
import re
import zlib
from typing import IO, Callable, Iterator, Mapping, Sequence

from t5rank.files import atomic_write

logger = logging.getLogger(__name__)

QUERY_ID_KEYS = ("id", "qid", "_id", "query_id")
QUERY_TEXT_KEYS = ("text", "query")
DOC_ID_KEYS = ("id", "docid", "_id", "doc_id")
DOC_TEXT_KEYS = ("text", "contents", "body")

Run = dict[str, list[tuple[str, float]]]


class InputFormatError(ValueError):
  """A malformed input line; the message names the file, the line and what was expected."""


class BadLine(Exception):
  """Raised by a line handler; `read_lines` adds the file name and line number."""


@dataclasses.dataclass(frozen=True)
class Document:
  """One corpus entry. `title` is "" when the corpus has none."""
  text: str
  title: str = ""


def document_text(document: Document, text: str | None = None) -> str:
  """`text` (default: the document's whole text) with the document's title in front when it has
  one: what BM25 indexes, training reads and the scorer scores for a document or one window."""
  text = document.text if text is None else text
  return f"{document.title} {text}".rstrip() if document.title else text


def _open_binary(path: str) -> IO[bytes]:
  return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


# what gzip raises for a file that is not gzip (BadGzipFile), cut short (EOFError) or corrupt
_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def _gzip_error(path: str, lines: int, e: Exception) -> InputFormatError:
  reason = str(e) or type(e).__name__
  return InputFormatError(f"{path}: unreadable gzip data after {lines} line(s) ({reason}): the "
                          "file is cut short, corrupt, or not gzip despite its .gz name")


def _raw_lines(path: str) -> Iterator[bytes]:
  """The lines of `path` as bytes, gunzipped when its name ends in `.gz` (`_GZIP_ERRORS` become
  InputFormatError naming the file)."""
  lines = 0
  try:
    with _open_binary(path) as f:
      for raw in f:
        yield raw
        lines += 1
  except _GZIP_ERRORS as e:
    raise _gzip_error(path, lines, e) from None


def read_lines(path: str, handle: Callable[[str], None], skip_bad: bool) -> None:
  """Calls `handle(line)` on each non-blank decoded line (without its line break)."""
  bad: list[str] = []
  for lineno, raw in enumerate(_raw_lines(path), start=1):
    try:
      try:
        line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")  # a byte-order mark is fine
      except UnicodeDecodeError as e:
        raise BadLine(f"undecodable bytes (expected UTF-8) at byte {e.start}") from None
      line = line.rstrip("\r\n")
      if line.strip():
        handle(line)
    except BadLine as e:
      message = f"{path}:{lineno}: {e}"
      if not skip_bad:
        raise InputFormatError(message) from None
      bad.append(message)
  if bad:
    logger.warning("%s: skipped %d malformed line(s); first: %s", path, len(bad), bad[0])


def _is_jsonl(path: str) -> bool:
  for raw in _raw_lines(path):
    if raw.strip():
      return raw.lstrip().removeprefix(b"\xef\xbb\xbf").startswith(b"{")
  return False


def _json_object(line: str) -> dict:
  try:
    obj = json.loads(line)
  except json.JSONDecodeError as e:
    raise BadLine(f"bad JSON ({e.msg} at column {e.colno})") from None
  if not isinstance(obj, dict):
    raise BadLine(f"expected a JSON object, got {type(obj).__name__}")
  return obj


def _json_field(obj: dict, keys: Sequence[str], what: str, required: bool = True) -> str | None:
  for key in keys:
    if key in obj:
      value = obj[key]
      if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadLine(f"{what} key {key!r} must be a string, got {type(value).__name__}")
      return str(value)
  if required:
    raise BadLine(f"no {what} key; expected one of {list(keys)}, found {sorted(obj)}")
  return None


def split_columns(line: str, sep: str | None, counts: Sequence[int], expected: str) -> list[str]:
  """`line` split on `sep` (None: any whitespace); `BadLine` unless the count is one of `counts`."""
  fields = line.split(sep)
  if len(fields) not in counts:
    raise BadLine(f"expected {expected}, got {len(fields)} column(s)")
  return fields


def _add_unique(table: dict, key: str, value, what: str) -> None:
  if not key.strip():
    raise BadLine(f"empty {what} id")
  if key in table:
    raise BadLine(f"duplicate {what} id {key!r}")
  table[key] = value


def read_queries(path: str, *, skip_bad: bool = False) -> dict[str, str]:
  """qid -> query text, from TSV `qid<TAB>text` or JSONL; empty ids, empty queries and duplicate
  ids are errors."""
  queries: dict[str, str] = {}
  jsonl = _is_jsonl(path)

  def handle(line: str) -> None:
    if jsonl:
      obj = _json_object(line)
      qid = _json_field(obj, QUERY_ID_KEYS, "query id")
      text = _json_field(obj, QUERY_TEXT_KEYS, "query text")
    else:
      qid, text = split_columns(line, "\t", (2,), "2 tab-separated columns (qid, text)")
    if not text.strip():
      raise BadLine(f"empty query text for query {qid!r}")
    _add_unique(queries, qid, text, "query")

  read_lines(path, handle, skip_bad)
  return queries


def read_corpus(path: str, *, skip_bad: bool = False) -> dict[str, Document]:
  """docid -> Document, from TSV `id<TAB>text[<TAB>title]` or JSONL; empty text is kept as an empty
  document; empty and duplicate ids are errors."""
  corpus: dict[str, Document] = {}
  jsonl = _is_jsonl(path)

  def handle(line: str) -> None:
    if jsonl:
      obj = _json_object(line)
      docid = _json_field(obj, DOC_ID_KEYS, "document id")
      text = _json_field(obj, DOC_TEXT_KEYS, "document text")
      title = _json_field(obj, ("title",), "title", required=False) or ""
    else:
      fields = split_columns(line, "\t", (2, 3), "2 or 3 tab-separated columns (id, text[, title])")
      docid, text, title = (fields + [""])[:3]
    _add_unique(corpus, docid, Document(text=text, title=title), "document")

  read_lines(path, handle, skip_bad)
  return corpus


def read_qrels(path: str, *, skip_bad: bool = False) -> dict[str, dict[str, int]]:
  """qid -> {docid: relevance}, from TREC qrels `qid 0 docid relevance`. A repeated pair with the
  same label is harmless; with conflicting labels the last wins and a warning names the count and
  the first such pair."""
  qrels: dict[str, dict[str, int]] = {}
  conflicts: list[str] = []

  def handle(line: str) -> None:
    qid, _, docid, rel = split_columns(line, None, (4,), "4 columns (qid 0 docid relevance)")
    try:
      relevance = int(rel)
    except ValueError:
      raise BadLine(f"relevance must be an integer, got {rel!r}") from None
    previous = qrels.setdefault(qid, {}).get(docid)
    if previous is not None and previous != relevance:
      conflicts.append(f"query {qid!r}, document {docid!r}: {previous} then {relevance}")
    qrels[qid][docid] = relevance

  read_lines(path, handle, skip_bad)
  if conflicts:
    logger.warning("%s: %d judged pair(s) repeated with conflicting labels (the last is used); "
                   "first: %s", path, len(conflicts), conflicts[0])
  return qrels


def read_run(path: str, *, skip_bad: bool = False) -> Run:
  """qid -> [(docid, score), ...] in file order, from a TREC run (6 columns) or `qid docid` lines.

  Two-column files carry no score; each candidate gets -(its position in the query's list), so that
  sorting by score keeps the file order. A docid repeated within a query is an error.
  """
  run: Run = {}
  seen: set[tuple[str, str]] = set()

  def handle(line: str) -> None:
    fields = split_columns(line, None, (2, 6),
                      "6 columns (qid Q0 docid rank score tag) or 2 columns (qid docid)")
    qid, docid = (fields[0], fields[2]) if len(fields) == 6 else fields
    if (qid, docid) in seen:
      raise BadLine(f"document {docid!r} appears twice for query {qid!r}")
    if len(fields) == 6:
      try:
        int(fields[3])
        score = float(fields[4])
      except ValueError:
        raise BadLine(f"rank must be an integer and score a number, got {fields[3]!r}, "
                       f"{fields[4]!r}") from None
    else:
      score = -float(len(run.get(qid, ())) + 1)
    seen.add((qid, docid))
    run.setdefault(qid, []).append((docid, score))

  read_lines(path, handle, skip_bad)
  return run


@dataclasses.dataclass(frozen=True)
class Topic:
  """One TREC topic; `description` and `narrative` are "" when the file has none."""
  title: str
  description: str = ""
  narrative: str = ""


_TOPIC_BLOCK = re.compile(r"<top>(.*?)</top>", re.DOTALL)
_TOPIC_TAG = re.compile(r"<(num|title|desc|narr)>")
_TOPIC_LABELS = {"num": "Number:", "title": "Topic:", "desc": "Description:", "narr": "Narrative:"}


def read_trec_topics(path: str) -> dict[str, Topic]:
  """topic number -> Topic, from a TREC topics file: `<top>` ... `</top>` blocks whose fields open
  with `<num> Number: 301`, `<title> ...`, `<desc> Description: ...`, `<narr> Narrative: ...` (not
  closed; closing tags are allowed too). Labels are dropped and whitespace runs collapsed. A block
  without a number or a title, a repeated number, or a file without blocks raises InputFormatError
  naming the file and the line of the block's `<top>`."""
  raw = b"".join(_raw_lines(path))
  try:
    text = raw.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = raw.count(b"\n", 0, e.start) + 1
    raise InputFormatError(f"{path}:{line}: undecodable bytes (expected UTF-8)") from None
  topics: dict[str, Topic] = {}
  for block in _TOPIC_BLOCK.finditer(text):
    line = text.count("\n", 0, block.start()) + 1
    where = f"{path}:{line}"
    parts = _TOPIC_TAG.split(re.sub(r"</(num|title|desc|narr)>", " ", block[1]))
    fields = {}
    for tag, content in zip(parts[1::2], parts[2::2]):
      content = " ".join(content.split())
      if content.startswith(_TOPIC_LABELS[tag]):
        content = content[len(_TOPIC_LABELS[tag]):].strip()
      fields[tag] = content
    if not fields.get("num") or not fields.get("title"):
      raise InputFormatError(f"{where}: a topic needs <num> and <title>; found "
                             f"{sorted(tag for tag, value in fields.items() if value)}")
    if fields["num"] in topics:
      raise InputFormatError(f"{where}: duplicate topic number {fields['num']!r}")
    topics[fields["num"]] = Topic(fields["title"], fields.get("desc", ""), fields.get("narr", ""))
  if not topics:
    raise InputFormatError(f"{path}: no <top> ... </top> topic found (expected a TREC topics file)")
  unclosed = text.rfind("<top>")
  if unclosed > text.rfind("</top>"):
    logger.warning("%s:%d: a <top> block is never closed (a truncated file?); its topic is left "
                   "out", path, text.count("\n", 0, unclosed) + 1)
  return topics


def check_finite_run(run: Mapping[str, Sequence[tuple[str, float]]], name: str = "the run") -> None:
  """Raises ValueError naming the first (query, document) and the count when `run` holds a NaN or
  infinite score: a ranking of such scores looks valid and is not."""
  bad = [(qid, docid, score) for qid, docs in run.items() for docid, score in docs
         if not math.isfinite(score)]
  if bad:
    qid, docid, score = bad[0]
    raise ValueError(f"{name} holds {len(bad)} non-finite score(s), e.g. query {qid!r}, document "
                     f"{docid!r}: {score!r}; refusing to rank or evaluate it")


def _run_lines(run: Mapping[str, Sequence[tuple[str, float]]], tag: str) -> Iterator[str]:
  """TREC run lines `qid Q0 docid rank score tag` (with newline), in the given order, ranks from 1;
  scores are written with `repr`, so reading them back gives the same floats."""
  if not tag or tag.split() != [tag]:
    raise ValueError(f"run tag must be a non-empty word without whitespace, got {tag!r}")
  checked: set[str] = set()  # a document is in many queries' lists: each id is checked once
  for qid, candidates in run.items():
    check_run_id(qid, "query")
    for rank, (docid, score) in enumerate(candidates, start=1):
      if docid not in checked:
        check_run_id(docid, "document")
        checked.add(docid)
      yield f"{qid} Q0 {docid} {rank} {float(score)!r} {tag}\n"


def check_run_id(identifier: str, what: str, source: str = "") -> None:
  """Raises ValueError when `identifier` cannot stand in a TREC run (empty, or with whitespace, which
  separates its columns: the run could not be read back)."""
  if not isinstance(identifier, str) or identifier.split() != [identifier]:  # empty, whitespace
    raise ValueError(f"{source + ': ' if source else ''}{what} id {identifier!r} cannot be written "
                     "into a TREC run (ids must be non-empty and free of whitespace)")


def write_run(path: str, run: Mapping[str, Sequence[tuple[str, float]]], tag: str) -> None:
  """Writes `run` as a TREC run, atomically (temporary name, then rename). Queries and candidates
  are written in the order given; sort them before calling. A NaN or infinite score is refused
  before anything is written (`check_finite_run`)."""
  check_finite_run(run, f"the run for {path}")
  with atomic_write(path) as f:
    f.writelines(_run_lines(run, tag))
