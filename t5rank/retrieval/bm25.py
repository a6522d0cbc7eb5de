"""`t5rank retrieve`: first-stage BM25 and BM25+RM3 retrieval, writing a TREC run.

BM25 is bm25s's "lucene" variant, the formula Anserini (Lucene 8+) uses:

  score(q, d) = sum over query terms t of  w(t) * idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))
  idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))

where w(t) is the term's count in the query (Anserini's bag-of-words query) or its RM3 weight; no
(k1 + 1) factor; document lengths exact (Lucene rounds them to one byte, so Anserini's figures can
differ in the third decimal). Defaults k1=0.9, b=0.4 are Anserini's.

Tokenization is Anserini's analyzers' (`t5rank.data.analysis`: `en` Porter-stemmed words without
Lucene's stopwords, `zh` character bigrams, `zh-jieba` jieba's search-engine words).

RM3 follows Anserini's Rm3Reranker: the top `fb_docs` documents of the first BM25 ranking each give
a term distribution (their `fb_terms` most frequent terms of 2-20 alphanumeric characters that occur
in at most 10% of the collection, normalized to sum 1); the relevance model weights each term by the
sum of those probabilities times the document's BM25 score, is cut to its `fb_terms` best terms and
normalized; the final query is `original_weight * query + (1 - original_weight) * model`, with the
query's term counts normalized to sum 1, and is scored by a second, weighted BM25 retrieval.

The index (bm25s's score matrix, plus document ids and term frequencies for RM3) is saved to a
directory together with a key (corpus hash, k1, b, language, format); a later run with the same key
loads it, a different key rebuilds it.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import logging
import os
from typing import Mapping, Sequence

import numpy as np

from t5rank.data.analysis import tokenize
from t5rank.data.readers import Document, Run, document_text
from t5rank.files import atomic_directory
from t5rank.retrieval.base import Retriever
from t5rank.reuse import cached


DEFAULT_K1, DEFAULT_B = 0.9, 0.4  # Anserini's
INDEX_FORMAT = 1
KEY_FILE = "t5rank_index.json"
DOC_IDS_FILE = "doc_ids.json"
TERM_FREQS_FILE = "term_freqs.npz"
# RM3 feedback terms: Anserini's filter (length 2-20, alphanumeric, in at most 10% of documents).
FEEDBACK_MIN_LEN, FEEDBACK_MAX_LEN, FEEDBACK_MAX_DF_RATIO = 2, 20, 0.1


@dataclasses.dataclass(frozen=True)
class RM3:
  """RM3 settings (Anserini's defaults)."""
  fb_docs: int = 10
  fb_terms: int = 10
  original_weight: float = 0.5

  def __post_init__(self):
    if self.fb_docs < 1 or self.fb_terms < 1 or not 0.0 <= self.original_weight <= 1.0:
      raise ValueError(f"RM3 needs fb_docs >= 1, fb_terms >= 1, 0 <= original_weight <= 1; got {self}")


def index_key(corpus: Mapping[str, Document], *, k1: float, b: float, language: str) -> dict:
  """What an index depends on; a saved index is reused only when its key is equal."""
  digest = hashlib.sha256()
  for doc_id, document in corpus.items():
    digest.update(f"{doc_id}\t{document.title}\t{document.text}\n".encode("utf-8"))
  return {"format": INDEX_FORMAT, "language": language, "k1": k1, "b": b,
          "num_docs": len(corpus), "corpus_sha256": digest.hexdigest()}


def _bm25s():
  """The bm25s module, with its logger kept at WARNING (it sets itself to DEBUG when imported)."""
  import bm25s

  logging.getLogger(bm25s.__name__).setLevel(logging.WARNING)
  return bm25s


class BM25Index:
  """A BM25 index around a `bm25s.BM25`: `weights` (documents x terms, CSC) is its score matrix,
  each term's BM25 contribution in each document; `term_freqs` (documents x terms, CSR) holds the
  raw counts for RM3."""

  def __init__(self, bm25, doc_ids: list[str], term_freqs, key: dict):
    import scipy.sparse as sp

    self.bm25 = bm25
    self.doc_ids = doc_ids
    self.vocab: dict[str, int] = bm25.vocab_dict
    self.terms = sorted(self.vocab, key=self.vocab.__getitem__)  # term id -> term
    s = bm25.scores
    self.weights = sp.csc_matrix((s["data"], s["indices"], s["indptr"]),
                                 shape=(len(doc_ids), len(self.vocab)))
    self.term_freqs = term_freqs
    self.key = key
    self.doc_index = {doc_id: i for i, doc_id in enumerate(doc_ids)}
    # rank of each document id in sorted order: score ties are broken by document id, as Anserini
    self._id_rank = np.argsort(np.argsort(np.array(doc_ids, dtype=object), kind="stable"))
    doc_freqs = np.bincount(term_freqs.indices, minlength=len(self.vocab))
    self.feedback_terms = np.array(
        [FEEDBACK_MIN_LEN <= len(t) <= FEEDBACK_MAX_LEN and t.isalnum() for t in self.terms],
        dtype=bool) & (doc_freqs <= FEEDBACK_MAX_DF_RATIO * len(doc_ids))

  @classmethod
  def build(cls, corpus: Mapping[str, Document], *, k1: float, b: float,
            language: str) -> BM25Index:
    """Tokenizes `corpus` and computes the BM25 weights with bm25s."""
    bm25s = _bm25s()
    import scipy.sparse as sp

    if not corpus:
      raise ValueError("cannot index an empty corpus")
    vocab: dict[str, int] = {}
    token_ids = [[vocab.setdefault(t, len(vocab)) for t in tokenize(document_text(d), language)]
                 for d in corpus.values()]
    bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
    bm25.index(bm25s.tokenization.Tokenized(ids=token_ids, vocab=vocab), create_empty_token=False,
               show_progress=False)
    rows = np.repeat(np.arange(len(token_ids)), [len(ids) for ids in token_ids])
    cols = np.fromiter((t for ids in token_ids for t in ids), dtype=np.int64, count=len(rows))
    term_freqs = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)),
                               shape=(len(token_ids), len(vocab)))  # duplicates are summed
    return cls(bm25, list(corpus), term_freqs, index_key(corpus, k1=k1, b=b, language=language))

  def save(self, directory: str) -> None:
    """Writes the index to `directory` (built under a temporary name, then renamed). An existing
    `directory` is replaced only when it is empty or holds a t5rank index."""
    import scipy.sparse as sp

    if os.path.isdir(directory) and os.listdir(directory) and not os.path.exists(
        os.path.join(directory, KEY_FILE)):
      raise FileExistsError(f"{directory} exists and is not a t5rank index; not overwriting it")
    with atomic_directory(directory) as tmp:
      self.bm25.save(tmp, show_progress=False)
      with open(os.path.join(tmp, DOC_IDS_FILE), "w", encoding="utf-8") as f:
        json.dump(self.doc_ids, f, ensure_ascii=False)
      sp.save_npz(os.path.join(tmp, TERM_FREQS_FILE), self.term_freqs)
      with open(os.path.join(tmp, KEY_FILE), "w", encoding="utf-8") as f:
        json.dump(self.key, f, indent=1)

  @classmethod
  def load(cls, directory: str) -> BM25Index:
    """Reads an index written by `save`."""
    import scipy.sparse as sp

    bm25s = _bm25s()
    with open(os.path.join(directory, KEY_FILE), encoding="utf-8") as f:
      key = json.load(f)
    bm25 = bm25s.BM25.load(directory, show_progress=False)
    with open(os.path.join(directory, DOC_IDS_FILE), encoding="utf-8") as f:
      doc_ids = json.load(f)
    term_freqs = sp.load_npz(os.path.join(directory, TERM_FREQS_FILE)).tocsr()
    return cls(bm25, doc_ids, term_freqs, key)

  def query_counts(self, query: str) -> tuple[dict[int, float], int]:
    """(term id -> count in the query, for terms in the index; number of query terms in all)."""
    terms = tokenize(query, self.key["language"])
    counts = collections.Counter(self.vocab[t] for t in terms if t in self.vocab)
    return {t: float(c) for t, c in counts.items()}, len(terms)

  def score(self, query_weights: Mapping[int, float]) -> np.ndarray:
    """BM25 score of every document for a weighted query (term id -> weight): (num_docs,)."""
    if not query_weights:
      return np.zeros(len(self.doc_ids), np.float32)
    term_ids = np.fromiter(query_weights, dtype=np.int64)
    w = np.fromiter(query_weights.values(), dtype=np.float32)
    return np.asarray(self.weights[:, term_ids] @ w).ravel()

  def rank(self, scores: np.ndarray, k: int, candidates: np.ndarray | None = None) -> np.ndarray:
    """Document indices of the top `k` by score, ties by document id. Without `candidates`, only
    documents that match the query (score > 0) are ranked; with them (document indices), all of
    them are, whatever their score."""
    pool = np.flatnonzero(scores > 0) if candidates is None else candidates
    if len(pool) > k:
      kth = np.partition(scores[pool], len(pool) - k)[len(pool) - k]
      pool = pool[scores[pool] >= kth]
    order = np.lexsort((self._id_rank[pool], -scores[pool]))
    return pool[order[:k]]


def open_index(corpus: Mapping[str, Document], directory: str | None, *, k1: float = DEFAULT_K1,
               b: float = DEFAULT_B, language: str = "en") -> BM25Index:
  """The index of `corpus`: loaded from `directory` when it holds one with the same key, else built
  (and saved there when `directory` is given; an index of other inputs there is moved aside to
  DIRECTORY.previous: `t5rank.reuse.cached`, a directory made whole)."""
  key = index_key(corpus, k1=k1, b=b, language=language)
  if not directory:
    return BM25Index.build(corpus, k1=k1, b=b, language=language)
  if (os.path.isdir(directory) and os.listdir(directory)
      and not os.path.exists(os.path.join(directory, KEY_FILE))):  # not ours: never moved
    raise FileExistsError(f"{directory} exists and is not a t5rank index; not overwriting it")
  built = []

  def build() -> None:
    built.append(BM25Index.build(corpus, k1=k1, b=b, language=language))
    built[0].save(directory)

  cached(directory, key, build, what="the BM25 index", stamp=os.path.join(directory, KEY_FILE),
         complete=lambda path: os.path.isfile(os.path.join(path, KEY_FILE)), records_key=True)
  return built[0] if built else BM25Index.load(directory)


def rm3_weights(index: BM25Index, query_counts: Mapping[int, float], query_length: int,
                feedback: np.ndarray, feedback_scores: np.ndarray, rm3: RM3) -> dict[int, float]:
  """The RM3 query (term id -> weight) from the query's term counts, its number of terms, and the
  feedback documents (indices) with their first-pass BM25 scores (see the module docstring)."""
  model: dict[int, float] = collections.defaultdict(float)
  for doc, doc_score in zip(feedback, feedback_scores):
    row = index.term_freqs[doc]
    keep = index.feedback_terms[row.indices]
    terms, freqs = row.indices[keep], row.data[keep]
    top = sorted(range(len(terms)), key=lambda i: (-freqs[i], index.terms[terms[i]]))[:rm3.fb_terms]
    norm = float(sum(freqs[i] for i in top))
    if norm == 0:  # no usable feedback term in this document
      continue
    for i in top:
      model[int(terms[i])] += float(freqs[i]) / norm * float(doc_score)
  best = sorted(model.items(), key=lambda tw: (-tw[1], index.terms[tw[0]]))[:rm3.fb_terms]
  total = sum(w for _, w in best)
  expanded = {t: (1.0 - rm3.original_weight) * w / total for t, w in best}
  for t, count in query_counts.items():
    expanded[t] = expanded.get(t, 0.0) + rm3.original_weight * count / query_length
  return expanded


def query_weights(index: BM25Index, query: str, rm3: RM3 | None = None,
                  candidates: np.ndarray | None = None) -> dict[int, float]:
  """The weighted query that `search` scores: the query's term counts, or with `rm3` its RM3
  expansion (feedback from the first ranking, within `candidates` when given)."""
  counts, length = index.query_counts(query)
  if rm3 is None or not counts:
    return counts
  first = index.score(counts)
  feedback = index.rank(first, rm3.fb_docs, candidates)
  feedback = feedback[first[feedback] > 0]
  return rm3_weights(index, counts, length, feedback, first[feedback], rm3)


def search(index: BM25Index, query: str, *, k: int = 1000, rm3: RM3 | None = None,
           candidates: Sequence[str] | None = None) -> list[tuple[str, float]]:
  """Top `k` (document id, score) for `query`, best first. With `candidates` (document ids), only
  those are ranked, all of them kept (a reranking of a candidate list)."""
  cand = None
  if candidates is not None:
    missing = [d for d in candidates if d not in index.doc_index]
    if missing:
      raise ValueError(f"{len(missing)} candidate document(s) are not in the corpus, e.g. "
                       f"{missing[0]!r}")
    cand = np.fromiter((index.doc_index[d] for d in candidates), dtype=np.int64)
  scores = index.score(query_weights(index, query, rm3, cand))
  return [(index.doc_ids[i], float(scores[i])) for i in index.rank(scores, k, cand)]


def retrieve(index: BM25Index, queries: Mapping[str, str], *, k: int = 1000, rm3: RM3 | None = None,
             candidates: Mapping[str, Sequence[tuple[str, float]]] | None = None) -> Run:
  """`search` for every query: qid -> ranked [(docid, score)]. With `candidates` (a run), each query
  reranks its own candidate list, and queries without one are left out."""
  run: Run = {}
  for qid, query in queries.items():
    if candidates is not None and qid not in candidates:
      continue
    cand = None if candidates is None else [d for d, _ in candidates[qid]]
    try:
      run[qid] = search(index, query, k=k, rm3=rm3, candidates=cand)
    except ValueError as e:
      raise ValueError(f"query {qid!r}: {e}") from None
  return run


class BM25(Retriever):
  """BM25 (or BM25+RM3 with `rm3`) as a `Retriever` over a `BM25Index`."""

  def __init__(self, index: BM25Index, rm3: RM3 | None = None):
    self.index = index
    self.rm3 = rm3
    self.name = "bm25_rm3" if rm3 else "bm25"

  @classmethod
  def build(cls, corpus: Mapping[str, Document], *, k1: float = DEFAULT_K1, b: float = DEFAULT_B,
            language: str = "en", rm3: RM3 | None = None) -> BM25:
    return cls(BM25Index.build(corpus, k1=k1, b=b, language=language), rm3)

  @classmethod
  def load(cls, directory: str, *, rm3: RM3 | None = None) -> BM25:
    return cls(BM25Index.load(directory), rm3)

  @classmethod
  def open(cls, corpus: Mapping[str, Document], directory: str | None, *, k1: float = DEFAULT_K1,
           b: float = DEFAULT_B, language: str = "en", rm3: RM3 | None = None) -> BM25:
    """`open_index`: loaded from `directory` when it holds the same corpus and settings, else built
    (and saved there when given)."""
    return cls(open_index(corpus, directory, k1=k1, b=b, language=language), rm3)

  def save(self, directory: str) -> None:
    self.index.save(directory)

  def retrieve(self, queries: Mapping[str, str], *, k: int = 1000,
               candidates: Run | None = None) -> Run:
    return retrieve(self.index, queries, k=k, rm3=self.rm3, candidates=candidates)
