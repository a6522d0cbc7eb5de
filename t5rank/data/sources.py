"""Training data sources: every dataset becomes a `TripleTable` of (query, positive, negative pool).

A `TripleTable` holds texts once and triples as integer indices; an epoch is a seeded permutation of
its positive rows, each paired with a negative drawn from its pool, so that the triple at any
position of the stream is computed directly (this is what makes resuming at a step exact and cheap).

Sources (all offline):
- InsuranceQA v2 from the `insuranceqa-data` package: `insuranceqa(split, language)`, language
  `en` or `zh`; a query's pool is its 200 retrieved negatives (less any that are also relevant).
- MS MARCO passage `triples.train.small.tsv` (`query<TAB>positive<TAB>negative`):
  `msmarco_passage_triples(path=...)`; each triple is its own pool of one, so an epoch is the file.
- MS MARCO `qidpidtriples` (`qid<TAB>pid<TAB>pid`) with `queries.tsv` and `collection.tsv`:
  `msmarco_passage_qidpid(...)`.
- The generic form: queries, corpus, qrels and a candidate run (see `t5rank.data.readers` for formats):
  `generic_triples(...)`; positives are qrels with relevance > 0, a query's pool is its run
  candidates that are not relevant.

The file-based loaders are gin-configurable through the tasks that use them (`tasks/` registers
them with gin: `msmarco_passage_triples.path = %MSMARCO_TRIPLES`) and
fall back to environment variables, read only when the data is first needed.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from typing import Iterator, Optional, Sequence

import numpy as np

from t5rank.data.insuranceqa import load_records, split_of
from t5rank.data.readers import (BadLine, InputFormatError, document_text, read_corpus, read_lines,
                                 read_qrels, read_queries, read_run, split_columns)

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TripleTable:
  """Triples in index form: `positives[i] = (query index, document index)`, and row i's negatives
  are `pool_docs[pool_starts[p]:pool_starts[p + 1]]` with `p = positive_pools[i]`. A scored table
  also has each pair's first-stage (BM25) score: `positive_scores[i]` for row i's positive and
  `pool_scores[j]` for the negative `pool_docs[j]` (see `t5rank.data.bm25_input`)."""
  queries: Sequence[str]
  documents: Sequence[str]
  positives: np.ndarray  # (P, 2) int64
  positive_pools: np.ndarray  # (P,) int64
  pool_starts: np.ndarray  # (K + 1,) int64
  pool_docs: np.ndarray  # (M,) int64
  positive_scores: Optional[np.ndarray] = None  # (P,) float64
  pool_scores: Optional[np.ndarray] = None  # (M,) float64

  def __post_init__(self):
    if (self.positive_scores is None) != (self.pool_scores is None):
      raise ValueError("a scored table needs both positive_scores and pool_scores")
    if self.scored and (len(self.positive_scores) != len(self.positives)
                        or len(self.pool_scores) != len(self.pool_docs)):
      raise ValueError(f"{len(self.positives)} positives and {len(self.pool_docs)} pool entries "
                       f"but {len(self.positive_scores)} and {len(self.pool_scores)} scores")

  @property
  def scored(self) -> bool:
    """Whether each pair carries its first-stage score."""
    return self.positive_scores is not None

  def __len__(self) -> int:
    """Triples per epoch (= positive rows)."""
    return len(self.positives)

  def epoch_entries(self, epoch: int, seed: int, shuffle: bool = True
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(positive rows, pool entries of their negatives) of one epoch, both (P,); the order (when
    `shuffle`) and the negatives are drawn from `seed` and `epoch` only."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(self)) if shuffle else np.arange(len(self))
    pools = self.positive_pools[order]
    starts = self.pool_starts[pools]
    picks = rng.integers(0, self.pool_starts[pools + 1] - starts)
    return order, starts + picks

  def triples(self, *, seed: int = 0, shuffle: bool = True, start: int = 0,
              num_epochs: Optional[int] = None, shard_index: int = 0,
              num_shards: int = 1) -> Iterator[tuple]:
    """Texts of the triple stream from global position `start` on (epoch after epoch, `None` =
    forever); a shard gets the positions `i` with `i % num_shards == shard_index`. A scored table
    yields (query, positive, negative, positive score, negative score)."""
    if not len(self):
      raise ValueError("the triple table is empty")
    position = start
    while num_epochs is None or position < num_epochs * len(self):
      epoch, offset = divmod(position, len(self))
      order, entries = self.epoch_entries(epoch, seed, shuffle)
      first = offset + (shard_index - position) % num_shards
      for row, entry in zip(order[first::num_shards], entries[first::num_shards]):
        q, p = self.positives[row]
        triple = self.queries[q], self.documents[p], self.documents[self.pool_docs[entry]]
        if self.scored:
          triple += (float(self.positive_scores[row]), float(self.pool_scores[entry]))
        yield triple
      position = (epoch + 1) * len(self)

  def subsample(self, n: int, seed: int) -> "TripleTable":
    """The data-poor regime: n positives and n negatives, drawn with `seed` (n distinct positive rows,
    each with one fixed negative from its pool), e.g. the paper's 1k + 1k."""
    if n > len(self):
      raise ValueError(f"cannot sample {n} positives from {len(self)}")
    order, entries = self.epoch_entries(0, seed)
    order, entries = order[:n], entries[:n]
    scores = {}
    if self.scored:
      scores = {"positive_scores": self.positive_scores[order],
                "pool_scores": self.pool_scores[entries]}
    return TripleTable(self.queries, self.documents, self.positives[order].copy(), np.arange(n),
                       np.arange(n + 1), self.pool_docs[entries].copy(), **scores)


class Interner:
  """Text -> index, keeping each distinct text once."""

  def __init__(self):
    self.index: dict[str, int] = {}
    self.texts: list[str] = []

  def __call__(self, text: str) -> int:
    i = self.index.get(text)
    if i is None:
      i = self.index[text] = len(self.texts)
      self.texts.append(text)
    return i


def pooled_table(queries: list[str], documents: list[str], positives: list[tuple[int, int]],
                  pools: list[list[int]], positive_pools: list[int]) -> TripleTable:
  starts = np.zeros(len(pools) + 1, np.int64)
  starts[1:] = np.cumsum([len(p) for p in pools])
  return TripleTable(queries, documents, np.asarray(positives, np.int64).reshape(-1, 2),
                     np.asarray(positive_pools, np.int64), starts,
                     np.asarray([d for p in pools for d in p], np.int64))


def _one_negative_table(queries: Interner, documents: Interner,
                        rows: list[tuple[int, int, int]]) -> TripleTable:
  """Fixed triples: each row its own pool of one negative."""
  array = np.asarray(rows, np.int64).reshape(-1, 3)
  n = len(array)
  return TripleTable(queries.texts, documents.texts, array[:, :2].copy(), np.arange(n),
                     np.arange(n + 1), array[:, 2].copy())


class _Enough(Exception):
  """Stops reading after `max_triples` lines."""


def _read_rows(path: str, parse, max_triples: Optional[int], skip_bad: bool) -> None:
  count = 0

  def handle(line: str) -> None:
    nonlocal count
    if max_triples is not None and count >= max_triples:
      raise _Enough
    parse(line)
    count += 1

  try:
    read_lines(path, handle, skip_bad)
  except _Enough:
    pass


def read_triples_tsv(path: str, *, max_triples: Optional[int] = None,
                     skip_bad: bool = False) -> TripleTable:
  """MS MARCO `triples.train.small.tsv`: `query<TAB>positive<TAB>negative` per line, in file order
  (at most `max_triples`). Bad lines raise `InputFormatError` (file:line: what was expected)."""
  queries, documents, rows = Interner(), Interner(), []

  def parse(line: str) -> None:
    query, positive, negative = split_columns(
        line, "\t", (3,), "3 tab-separated columns (query, positive passage, negative passage)")
    for name, text in (("query", query), ("positive passage", positive),
                       ("negative passage", negative)):
      if not text.strip():
        raise BadLine(f"empty {name}")
    rows.append((queries(query), documents(positive), documents(negative)))

  _read_rows(path, parse, max_triples, skip_bad)
  return _one_negative_table(queries, documents, rows)


def read_qidpid_triples(path: str, queries_path: str, collection_path: str, *,
                        max_triples: Optional[int] = None, skip_bad: bool = False) -> TripleTable:
  """MS MARCO `qidpidtriples`: `qid<TAB>positive pid<TAB>negative pid` per line, with the texts
  from `queries.tsv` (`qid<TAB>text`) and `collection.tsv` (`pid<TAB>text`)."""
  query_texts = read_queries(queries_path, skip_bad=skip_bad)
  corpus = read_corpus(collection_path, skip_bad=skip_bad)
  queries, documents, rows = Interner(), Interner(), []

  def parse(line: str) -> None:
    qid, pos, neg = split_columns(line, None, (3,), "3 columns (qid, positive pid, negative pid)")
    if qid not in query_texts:
      raise BadLine(f"unknown query id {qid!r} (not in {queries_path})")
    for pid in (pos, neg):
      if pid not in corpus:
        raise BadLine(f"unknown passage id {pid!r} (not in {collection_path})")
    rows.append((queries(query_texts[qid]), documents(document_text(corpus[pos])),
                 documents(document_text(corpus[neg]))))

  _read_rows(path, parse, max_triples, skip_bad)
  return _one_negative_table(queries, documents, rows)


def _line_of(path: str, *words: str) -> int:
  """The first line number of `path` whose whitespace-separated fields contain all of `words`."""
  with open(path, "rb") as f:
    for lineno, raw in enumerate(f, start=1):
      fields = raw.decode("utf-8", "replace").split()
      if all(w in fields for w in words):
        return lineno
  return 0


def read_generic_triples(queries_path: str, corpus_path: str, qrels_path: str, run_path: str, *,
                         depth: Optional[int] = None, skip_bad: bool = False) -> TripleTable:
  """Positives from qrels (relevance > 0); each query's negatives are the candidates of its run
  (its first `depth` when given) that qrels do not mark relevant. A qrels or run line naming an
  unknown query or document is an error (file:line), or skipped and counted with `skip_bad`.
  Queries left without a positive or without a negative are dropped (counted in the log)."""
  query_texts = read_queries(queries_path, skip_bad=skip_bad)
  corpus = read_corpus(corpus_path, skip_bad=skip_bad)
  qrels = read_qrels(qrels_path, skip_bad=skip_bad)
  run = read_run(run_path, skip_bad=skip_bad)

  def known(path: str, qid: str, docid: str) -> bool:
    missing = ("query", qid, queries_path) if qid not in query_texts else (
        ("document", docid, corpus_path) if docid not in corpus else None)
    if missing is None:
      return True
    message = (f"{path}:{_line_of(path, qid, docid)}: unknown {missing[0]} id {missing[1]!r} "
               f"(expected an id of {missing[2]})")
    if not skip_bad:
      raise InputFormatError(message)
    unknown.setdefault(path, []).append(message)
    return False

  unknown: dict[str, list[str]] = {}
  relevant = {qid: {d for d, rel in docs.items() if rel > 0 and known(qrels_path, qid, d)}
              for qid, docs in qrels.items()}
  candidates = {qid: [d for d, _ in ranked[:depth] if known(run_path, qid, d)]
                for qid, ranked in run.items()}
  for path, messages in unknown.items():
    logger.warning("%s: skipped %d line(s) with unknown ids; first: %s", path, len(messages),
                   messages[0])
  queries, documents = Interner(), Interner()
  positives, pools, positive_pools, dropped = [], [], [], 0
  for qid in query_texts:
    positive_ids = sorted(relevant.get(qid, ()))
    negative_ids = [d for d in candidates.get(qid, ()) if d not in relevant.get(qid, ())]
    if not positive_ids or not negative_ids:
      dropped += bool(positive_ids or negative_ids)
      continue
    q = queries(query_texts[qid])
    pools.append([documents(document_text(corpus[d])) for d in negative_ids])
    for d in positive_ids:
      positives.append((q, documents(document_text(corpus[d]))))
      positive_pools.append(len(pools) - 1)
  if dropped:
    logger.warning("%s: %d queries have positives but no negatives in the run, or the reverse; "
                   "they are left out", qrels_path, dropped)
  return pooled_table(queries.texts, documents.texts, positives, pools, positive_pools)


def mix_tables(*tables: TripleTable) -> TripleTable:
  """One table holding the rows of all `tables` (an epoch is a permutation of all their rows, so a
  table's share of every batch is its share of rows). Documents that are the same list object are
  stored once. Scored tables (`TripleTable.scored`) keep their scores; scored and unscored tables
  do not mix."""
  if len({table.scored for table in tables}) > 1:
    raise ValueError("cannot mix scored and unscored tables")
  queries: list[str] = []
  documents: list[str] = []
  document_offsets: dict[int, int] = {}
  positives, positive_pools, pool_docs, pool_sizes = [], [], [], []
  pools_so_far = 0
  for table in tables:
    key = id(table.documents)
    if key not in document_offsets:
      document_offsets[key] = len(documents)
      documents.extend(table.documents)
    doc_offset = document_offsets[key]
    positives.append(table.positives + np.asarray([len(queries), doc_offset], np.int64))
    positive_pools.append(table.positive_pools + pools_so_far)
    pool_docs.append(table.pool_docs + doc_offset)
    pool_sizes.append(np.diff(table.pool_starts))
    pools_so_far += len(table.pool_starts) - 1
    queries.extend(table.queries)
  starts = np.zeros(pools_so_far + 1, np.int64)
  starts[1:] = np.cumsum(np.concatenate(pool_sizes))
  scores = {}
  if tables and tables[0].scored:
    scores = {"positive_scores": np.concatenate([t.positive_scores for t in tables]),
              "pool_scores": np.concatenate([t.pool_scores for t in tables])}
  return TripleTable(queries, documents, np.concatenate(positives), np.concatenate(positive_pools),
                     starts, np.concatenate(pool_docs), **scores)


@functools.lru_cache(maxsize=8)
def insuranceqa(split: str, language: str = "en") -> TripleTable:
  """InsuranceQA v2 (`t5rank.data.insuranceqa`): one positive row per (query, relevant answer); the
  pool of a query is its retrieved negatives that are not relevant. `language` is `en` or `zh`."""
  records, answers = load_records(split, language)
  return insuranceqa_table(records, answers, language)


def insuranceqa_table(records: dict, answers: dict, language: str) -> TripleTable:
  """`insuranceqa` on given records (`{qid: {en, zh, answers, negatives}}`) and answers
  (`{aid: {en, zh}}`), in query-id order: the one loader's `split_of`, as a triple table (queries
  without a negative are left out)."""
  data = split_of(records, answers, language)
  answer_index = {aid: i for i, aid in enumerate(data.answers)}
  queries, positives, pools, positive_pools = [], [], [], []
  for qid, query in data.queries.items():
    pool = [answer_index[a] for a in data.negatives[qid]]
    if not pool:
      continue
    queries.append(query)
    pools.append(pool)
    for aid in data.relevant[qid]:
      positives.append((len(queries) - 1, answer_index[aid]))
      positive_pools.append(len(pools) - 1)
  return pooled_table(queries, list(data.answers.values()), positives, pools, positive_pools)


def _setting(value: Optional[str], env: str, what: str) -> str:
  value = value or os.environ.get(env)
  if not value:
    raise ValueError(f"no path for {what}: bind it in gin or set the environment variable {env}")
  return value


def msmarco_passage_triples(split: str = "train", *, path: Optional[str] = None,
                            max_triples: Optional[int] = None, skip_bad: bool = False) -> TripleTable:
  """`triples.train.small.tsv` from `path` (gin) or $MSMARCO_TRIPLES; only a train split."""
  del split
  return _cached(read_triples_tsv, _setting(path, "MSMARCO_TRIPLES", "MS MARCO triples"),
                 max_triples=max_triples, skip_bad=skip_bad)


def msmarco_passage_qidpid(split: str = "train", *, triples: Optional[str] = None,
                           queries: Optional[str] = None, collection: Optional[str] = None,
                           max_triples: Optional[int] = None,
                           skip_bad: bool = False) -> TripleTable:
  """`qidpidtriples` + `queries.tsv` + `collection.tsv` from gin or $MSMARCO_QIDPID_TRIPLES,
  $MSMARCO_QUERIES, $MSMARCO_COLLECTION; only a train split."""
  del split
  return _cached(read_qidpid_triples,
                 _setting(triples, "MSMARCO_QIDPID_TRIPLES", "MS MARCO qidpidtriples"),
                 _setting(queries, "MSMARCO_QUERIES", "MS MARCO queries.tsv"),
                 _setting(collection, "MSMARCO_COLLECTION", "MS MARCO collection.tsv"),
                 max_triples=max_triples, skip_bad=skip_bad)


def generic_triples(split: str = "train", *, queries: Optional[str] = None,
                    corpus: Optional[str] = None, qrels: Optional[str] = None,
                    run: Optional[str] = None, depth: Optional[int] = None,
                    skip_bad: bool = False) -> TripleTable:
  """The generic form from gin or $T5RANK_QUERIES, $T5RANK_CORPUS, $T5RANK_QRELS, $T5RANK_RUN."""
  del split
  return _cached(read_generic_triples, _setting(queries, "T5RANK_QUERIES", "queries"),
                 _setting(corpus, "T5RANK_CORPUS", "corpus"),
                 _setting(qrels, "T5RANK_QRELS", "qrels"), _setting(run, "T5RANK_RUN", "run"),
                 depth=depth, skip_bad=skip_bad)


@functools.lru_cache(maxsize=4)
def _cached(reader, *args, **kwargs) -> TripleTable:
  return reader(*args, **kwargs)
