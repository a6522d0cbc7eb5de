"""Dense retrieval: a corpus encoded offline, queries searched over all of it by cosine (Gillick et
al. 2018, section 3: end-to-end retrieval in continuous space). A `Retriever` like BM25.

    corpus ─► `encode_corpus` (an encoder of `t5rank.retrieval.encoders`; shards of unit vectors
              saved as they finish, so an interrupted `t5rank index` resumes) ─► index directory:
                vectors.npy (n, dim) float32, docids.txt, index.json (the encoder's fingerprint and
                source, its IDF weights in weights.npy when it has any), hnsw.faiss (optional)
    queries ─► the same encoder's query side ─► search:
      exact   the matrix product on the device, top k per query (chunks of the corpus merged)
      flat    faiss IndexFlatIP: exhaustive too, on faiss's CPU kernels
      hnsw    faiss IndexHNSWFlat (inner product): approximate, `ef_search` trades speed for recall

A query encoded by another encoder than the index's is refused (fingerprints differ). A query with
no known word (the zero vector) retrieves nothing, as BM25 does. Within the top k, ties are broken by
document id, as in every t5rank run; which of several documents tied exactly at the k-th score
make the cut is the search's choice (by corpus position for exact and flat search).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Mapping, Optional, Sequence

import numpy as np

from t5rank.data.readers import Document, Run, document_text
from t5rank.files import atomic_directory, atomic_write, check_manifest, file_manifest, load_array
from t5rank.retrieval.base import Retriever
from t5rank.retrieval.encoders import TextEncoder, load_encoder
from t5rank.reuse import resume_directory

SEARCHES = ("exact", "flat", "hnsw")
INDEX_FILE, VECTORS_FILE, DOCIDS_FILE, WEIGHTS_FILE, HNSW_FILE = (
    "index.json", "vectors.npy", "docids.txt", "weights.npy", "hnsw.faiss")
SHARDS_MANIFEST = "manifest.json"
SHARD_SIZE = 8192
CORPUS_CHUNK = 65536  # documents per device matrix product in exact search


def corpus_hash(docids: Sequence[str], texts: Sequence[str]) -> str:
  digest = hashlib.sha256()
  for docid, text in zip(docids, texts):
    digest.update(f"{docid}\t{text}\n".encode("utf-8"))
  return digest.hexdigest()


def encode_corpus(encoder: TextEncoder, texts: Sequence[str], work_dir: str, *,
                  shard_size: int = SHARD_SIZE, identity: Optional[dict] = None,
                  progress: bool = True, docids: Optional[Sequence[str]] = None) -> np.ndarray:
  """(n, dim) document vectors of `texts`, encoded in shards saved to `work_dir` as they finish
  (shard-00000.npz, ...: the vectors and the hash of the job and of the shard's texts). A rerun
  with the same `identity` (encoder, corpus, shard size) reuses the saved shards whose hash is
  theirs; a different job is refused rather than mixed in, and so is a shard of other texts."""
  from tqdm import tqdm

  identity = dict(identity or {}, shard_size=shard_size, encoder=encoder.fingerprint)
  resume_directory(work_dir, identity, manifest_file=SHARDS_MANIFEST,
                   what="the shards of a dense index")  # t5rank.reuse's resumable parts
  job = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
  docids = list(docids) if docids is not None else [str(i) for i in range(len(texts))]
  shards = []
  bar = tqdm(total=len(texts), unit="doc", desc="encoding", disable=not progress)
  for number, start in enumerate(range(0, len(texts), shard_size)):
    path = os.path.join(work_dir, f"shard-{number:05d}.npz")
    chunk = texts[start:start + shard_size]
    key = corpus_hash([job, *docids[start:start + shard_size]], ["", *chunk])
    if os.path.isfile(path):
      vectors = _read_shard(path, key)
    else:
      vectors = encoder.encode(chunk, "document")
      check_finite_vectors(vectors, docids[start:start + shard_size],
                           f"the vectors {encoder.source} gives")
      with atomic_write(path, "wb") as f:
        np.savez(f, vectors=vectors, key=np.array(key))
    shards.append(vectors)
    bar.update(len(chunk))
  bar.close()
  if not shards:
    return np.zeros((0, encoder.dim), np.float32)
  return np.concatenate(shards)


def _read_shard(path: str, key: str) -> np.ndarray:
  """The vectors of a saved shard, after checking it was encoded from the texts `key` hashes."""
  try:
    with np.load(path) as saved:
      vectors, saved_key = saved["vectors"], str(saved["key"])
  except (OSError, ValueError, KeyError, EOFError) as e:
    raise ValueError(f"{path}: not a readable shard ({e}); delete it to encode it again") from None
  if saved_key != key:
    raise ValueError(f"{path} holds the vectors of other texts than this shard's (another corpus "
                     "or position); delete it to encode it again")
  return vectors


def check_finite_vectors(vectors: np.ndarray, docids: Sequence[str], what: str) -> None:
  """Raises ValueError naming the count and the first document when a vector holds NaN or inf:
  such a vector would be indexed and ranked by `nan`."""
  bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
  if len(bad):
    raise ValueError(f"{what} hold NaN or inf for {len(bad)} document(s), e.g. "
                     f"{docids[bad[0]]!r}; refusing to index them")


class DenseRetriever(Retriever):
  """Cosine search over a corpus encoded by `encoder`."""

  name = "dense"

  def __init__(self, encoder: TextEncoder, docids: Sequence[str], vectors: np.ndarray, *,
               settings: Optional[dict] = None, hnsw=None):
    if vectors.shape != (len(docids), encoder.dim):
      raise ValueError(f"{vectors.shape} vectors for {len(docids)} documents of dim {encoder.dim}")
    check_finite_vectors(vectors, docids, "the document vectors")
    self.encoder, self.docids, self.vectors = encoder, list(docids), vectors
    self.position = {d: i for i, d in enumerate(self.docids)}
    self.settings = dict(settings or {})
    self.hnsw = hnsw
    self.search = "exact"
    self.ef_search = 128

  @classmethod
  def build(cls, corpus: Mapping[str, Document], *, encoder: Optional[TextEncoder] = None,
            encoder_path: str = "", weighting: str = "uniform", work_dir: Optional[str] = None,
            shard_size: int = SHARD_SIZE, hnsw_m: int = 0, progress: bool = True,
            **options) -> "DenseRetriever":
    """Encodes `corpus` with `encoder` (or the one in `encoder_path`, IDF-weighted by the corpus
    when `weighting` is idf); `work_dir` keeps the shards for a resume; `hnsw_m` > 0 also builds
    an HNSW graph with M = `hnsw_m` links."""
    docids = list(corpus)
    texts = [document_text(corpus[d]) for d in docids]
    if encoder is None:
      encoder = load_encoder(encoder_path, weighting=weighting, idf_texts=texts, **options)
    identity = {"corpus": corpus_hash(docids, texts), "weighting": weighting}
    if work_dir is None:
      vectors = encoder.encode(texts, "document")
    else:
      vectors = encode_corpus(encoder, texts, work_dir, shard_size=shard_size, identity=identity,
                              progress=progress, docids=docids)
    retriever = cls(encoder, docids, vectors, settings={"weighting": weighting,
                                                        "corpus": identity["corpus"]})
    if hnsw_m:
      retriever.build_hnsw(hnsw_m)
    return retriever

  def build_hnsw(self, m: int = 32, ef_construction: int = 200) -> None:
    import faiss

    if m < 2:  # faiss crashes on M = 1
      raise ValueError(f"an HNSW graph needs M >= 2 links per node, got {m}")
    index = faiss.IndexHNSWFlat(self.encoder.dim, m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.add(np.ascontiguousarray(self.vectors))
    self.hnsw = index
    self.settings.update(hnsw_m=m, ef_construction=ef_construction)

  def save(self, directory: str) -> None:
    with atomic_directory(directory) as temporary:
      np.save(os.path.join(temporary, VECTORS_FILE), self.vectors)
      with open(os.path.join(temporary, DOCIDS_FILE), "w", encoding="utf-8") as f:
        f.writelines(d + "\n" for d in self.docids)
      weights = getattr(self.encoder, "weights", None)
      if weights is not None:
        np.save(os.path.join(temporary, WEIGHTS_FILE), np.asarray(weights))
      if self.hnsw is not None:
        import faiss
        faiss.write_index(self.hnsw, os.path.join(temporary, HNSW_FILE))
      files = file_manifest(temporary)
      with open(os.path.join(temporary, INDEX_FILE), "w") as f:
        json.dump(dict(self.settings, documents=len(self.docids), **self.encoder.describe(),
                       files=files), f, indent=1)

  @classmethod
  def load(cls, directory: str, *, encoder_path: Optional[str] = None,
           **options) -> "DenseRetriever":
    """The index in `directory`, queried with the encoder it was built with (from the source it
    records, or `encoder_path`): an encoder with another fingerprint is refused."""
    path = os.path.join(directory, INDEX_FILE)
    if not os.path.isfile(path):
      raise FileNotFoundError(f"{path} not found: {directory} is not a `t5rank index` directory")
    try:
      with open(path, encoding="utf-8") as f:
        settings = json.load(f)
      source, fingerprint = settings["source"], settings["fingerprint"]
    except (ValueError, KeyError) as e:
      raise ValueError(f"{path}: not an index description of `t5rank index` ({e})") from None
    if "files" in settings:  # an index written before t5rank kept manifests has none
      check_manifest(directory, settings["files"], f"the index {directory}")
    weights_path = os.path.join(directory, WEIGHTS_FILE)
    weights = load_array(weights_path) if os.path.isfile(weights_path) else None
    encoder = load_encoder(encoder_path or source,
                           weighting=settings.get("weighting", "uniform"), weights=weights,
                           **options)
    if encoder.fingerprint != fingerprint:
      raise ValueError(f"the index {directory} was built with another encoder than "
                       f"{encoder.source} (fingerprints {fingerprint[:12]} and "
                       f"{encoder.fingerprint[:12]}): query it with the encoder that built it "
                       f"({source}) or rebuild it with `t5rank index`")
    with open(os.path.join(directory, DOCIDS_FILE), encoding="utf-8") as f:
      docids = [line.rstrip("\n") for line in f]
    hnsw = None
    if os.path.isfile(os.path.join(directory, HNSW_FILE)):
      import faiss
      hnsw = faiss.read_index(os.path.join(directory, HNSW_FILE))
    keep = {k: v for k, v in settings.items() if k in ("weighting", "corpus", "hnsw_m",
                                                       "ef_construction")}
    vectors_path = os.path.join(directory, VECTORS_FILE)
    vectors = load_array(vectors_path)
    if vectors.shape != (len(docids), encoder.dim):
      raise ValueError(f"{vectors_path}: shape {vectors.shape}, expected ({len(docids)}, "
                       f"{encoder.dim}) for the documents of {DOCIDS_FILE} and the encoder")
    try:
      return cls(encoder, docids, vectors, settings=keep, hnsw=hnsw)
    except ValueError as e:
      raise ValueError(f"{vectors_path}: {e}") from None

  def retrieve(self, queries: Mapping[str, str], *, k: int = 1000,
               candidates: Optional[Run] = None) -> Run:
    qids = list(queries)
    vectors = self.encoder.encode([queries[q] for q in qids], "query")
    if candidates is not None:
      return self._rerank(qids, vectors, candidates)
    k = min(k, len(self.docids))
    if k == 0 or not qids:
      return {q: [] for q in qids}
    scores, rows = self.search_vectors(vectors, k)
    known = np.abs(vectors).sum(1) > 0  # a query with no known word has nothing to match
    run: Run = {}
    for qid, s, r, ok in zip(qids, scores, rows, known):
      hits = [(self.docids[i], float(v)) for i, v in zip(r.tolist(), s.tolist()) if i >= 0 and ok]
      run[qid] = sorted(hits, key=lambda h: (-h[1], h[0]))
    return run

  def search_vectors(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, rows) (Q, k) of the top `k` documents of each query vector, by `self.search`."""
    if self.search not in SEARCHES:
      raise ValueError(f"unknown search {self.search!r}; choose one of {SEARCHES}")
    queries = np.ascontiguousarray(queries, np.float32)
    if self.search == "exact":
      return exact_top_k(queries, self.vectors, k)
    import faiss
    if self.search == "flat":
      index = faiss.IndexFlatIP(self.encoder.dim)
      index.add(np.ascontiguousarray(self.vectors))
    else:
      if self.hnsw is None:
        self.build_hnsw()
      index = self.hnsw
      # efSearch past the number of documents visits nothing more and only allocates
      index.hnsw.efSearch = min(max(self.ef_search, k), max(len(self.docids), 1))
    return index.search(queries, k)

  def _rerank(self, qids: Sequence[str], vectors: np.ndarray, candidates: Run) -> Run:
    run: Run = {}
    for qid, vector in zip(qids, vectors):
      if qid not in candidates:
        continue
      unknown = [d for d, _ in candidates[qid] if d not in self.position]
      if unknown:
        raise ValueError(f"query {qid}: candidate {unknown[0]!r} is not in the index")
      rows = [self.position[d] for d, _ in candidates[qid]]
      scores = self.vectors[rows] @ vector
      run[qid] = sorted(((d, float(s)) for (d, _), s in zip(candidates[qid], scores)),
                        key=lambda h: (-h[1], h[0]))
    return run


def exact_top_k(queries: np.ndarray, documents: np.ndarray, k: int,
                query_chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
  """Exhaustive inner-product top `k` on the default device: each chunk of queries against each
  chunk of the corpus (`CORPUS_CHUNK` documents), the chunks' top k merged."""
  import jax
  import jax.numpy as jnp

  @jax.jit
  def chunk_top(q, d):
    return jax.lax.top_k(q @ d.T, min(k, d.shape[0]))

  parts = [jnp.asarray(documents[s:s + CORPUS_CHUNK]) for s in range(0, len(documents),
                                                                      CORPUS_CHUNK)]
  all_scores, all_rows = [], []
  for start in range(0, len(queries), query_chunk):
    q = jnp.asarray(queries[start:start + query_chunk])
    scores, rows = [], []
    for offset, d in zip(range(0, len(documents), CORPUS_CHUNK), parts):
      s, r = chunk_top(q, d)
      scores.append(np.asarray(s))
      rows.append(np.asarray(r) + offset)
    s, r = np.concatenate(scores, 1), np.concatenate(rows, 1)
    best = np.argsort(-s, axis=1, kind="stable")[:, :k]
    all_scores.append(np.take_along_axis(s, best, 1))
    all_rows.append(np.take_along_axis(r, best, 1))
  return np.concatenate(all_scores), np.concatenate(all_rows)
