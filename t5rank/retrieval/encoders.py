"""Text encoders of dense retrieval: texts ─► unit vectors (n, dim) float32, one side for queries and
one for documents, and a fingerprint that an index records (`t5rank.retrieval.dense`).

    load_encoder(path)
      a dual encoder checkpoint (`t5rank train` with gin/runs/dual_encoder.gin)
          ─► `WordAverage` of its trained embeddings (f₁ for queries, f₂ for documents)
      a `t5rank embeddings` directory (word2vec on the collection)
          ─► `WordAverage` of those vectors, uniform or IDF-weighted (the paper's baselines)
      a T5 checkpoint (any format t5rank loads: monoT5, Hugging Face, t5x, ...)
          ─► `T5Mean`: T5's encoder, mean-pooled over the text's tokens

Cosine similarity is a dot product of the unit vectors; a text with no known word (or an empty
one) encodes to the zero vector, whose cosine with anything is 0.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import os
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.checkpoints.resolved import Checkpoint, resolve
from t5rank.models import registry
from t5rank.models.batching import round_up
from t5rank.models.dual_encoder import average, load_dual_encoder, load_t5_dual_encoder, t5_mean
from t5rank.models.loading import load_reranker
from t5rank.models.vectors import unit_vectors
from t5rank.models.vocab import EOS_ID
from t5rank.models.words import NUM_RESERVED, load_embeddings, words

SIDES = ("query", "document")
WEIGHTINGS = ("uniform", "idf")
CHUNK = 1024  # texts encoded per device call


class TextEncoder(abc.ABC):
  """Encodes texts to unit vectors; `fingerprint` changes with anything that changes a vector."""

  dim: int
  fingerprint: str
  source: str  # the path it was loaded from

  @abc.abstractmethod
  def encode(self, texts: Sequence[str], side: str) -> np.ndarray:
    """(len(texts), dim) float32 unit (or zero) rows; `side` "query" or "document"."""

  def describe(self) -> dict:
    return {"encoder": type(self).__name__, "source": self.source, "dim": self.dim,
            "fingerprint": self.fingerprint}


def _hash(*parts) -> str:
  digest = hashlib.sha256()
  for part in parts:
    digest.update(part if isinstance(part, bytes) else str(part).encode("utf-8"))
  return digest.hexdigest()


@functools.partial(jax.jit, static_argnames="normalize")
def _average(table, ids, weights, normalize=True):
  vectors = average(table, ids, weights)
  return unit_vectors(vectors) if normalize else vectors


def _check_side(side: str) -> None:
  if side not in SIDES:
    raise ValueError(f"side must be one of {SIDES}, got {side!r}")


def _by_length(rows: Sequence[np.ndarray], dim: int, chunk: int, fn) -> np.ndarray:
  """(len(rows), dim) float32 of `fn` over the id rows, taken in chunks of `chunk` rows of
  similar length (sorted by length, each chunk padded to its longest), in the rows' order."""
  out = np.zeros((len(rows), dim), np.float32)
  order = np.argsort([len(r) for r in rows], kind="stable")
  for start in range(0, len(rows), chunk):
    picked = order[start:start + chunk]
    out[picked] = np.asarray(fn(_padded([rows[i] for i in picked])))
  return out


def _padded(rows: Sequence[np.ndarray], bucket: int = 32) -> np.ndarray:
  width = round_up(max((len(r) for r in rows), default=1), bucket)
  ids = np.zeros((len(rows), width), np.int32)
  for i, r in enumerate(rows):
    ids[i, :len(r)] = r
  return ids


class WordAverage(TextEncoder):
  """The (weighted) average of word vectors: the dual encoder's f, and the averaged-embedding
  baselines. `tables` maps each side to its (vocab, dim) matrix (one shared matrix for both);
  `weights` (vocab,) weights each id (IDF) or None (uniform); texts are cut to `max_lengths`."""

  def __init__(self, vocabulary, tables: dict, *, weights: Optional[np.ndarray] = None,
               max_lengths: tuple[int, int] = (30, 256), source: str = ""):
    self.vocabulary = vocabulary
    self.tables = {side: jnp.asarray(tables[side], jnp.float32) for side in SIDES}
    self.weights = None if weights is None else jnp.asarray(weights, jnp.float32)
    self.max_lengths = dict(zip(SIDES, max_lengths))
    self.dim = int(tables["query"].shape[1])
    self.source = source
    self.fingerprint = _hash("word-average", vocabulary.sha256, max_lengths,
                             *(np.asarray(tables[s], np.float32).tobytes() for s in SIDES),
                             b"" if weights is None else np.asarray(weights, np.float32).tobytes())

  def encode(self, texts: Sequence[str], side: str) -> np.ndarray:
    _check_side(side)
    rows = [self.vocabulary.encode(t, self.max_lengths[side])[0] for t in texts]
    return _by_length(rows, self.dim, CHUNK,
                      lambda ids: _average(self.tables[side], ids, self.weights))


def idf_weights(vocabulary, texts: Sequence[str]) -> np.ndarray:
  """(vocab,) smoothed inverse document frequency of each id over `texts`:
  ln((1 + N) / (1 + df)) + 1 (scikit-learn's smooth IDF); padding and unknown ids weigh 0."""

  df = np.zeros(vocabulary.size, np.int64)
  for text in texts:
    ids = {vocabulary.index[w] for w in words(text) if w in vocabulary.index}
    df[list(ids)] += 1
  weights = np.log((1.0 + len(texts)) / (1.0 + df)) + 1.0
  weights[:NUM_RESERVED] = 0.0
  return weights.astype(np.float32)


class T5Mean(TextEncoder):
  """T5's encoder over the text's SentencePiece ids (documents cut to `max_length`, queries to
  `query_length`, EOS appended), its outputs averaged over the text's tokens: how a T5 checkpoint
  serves as a retriever (the T5 dual encoder's f)."""

  def __init__(self, config, params, vocab, *, max_length: int = 256, query_length: int = 32,
               source: str = ""):
    self.config, self.params, self.vocab = config, params, vocab
    self.max_lengths = {"query": query_length, "document": max_length}
    self.dim = config.d_model
    self.source = source
    leaves = jax.tree.leaves(params)
    self.fingerprint = _hash("t5-mean", config.to_json(), vocab.sha256, query_length, max_length,
                             *(np.asarray(x).tobytes() for x in leaves))

  def encode(self, texts: Sequence[str], side: str) -> np.ndarray:
    _check_side(side)
    length = self.max_lengths[side]
    rows = [np.asarray(ids[:length - 1] + [EOS_ID], np.int32)
            for ids in self.vocab.encode_batch(list(texts))]
    return _by_length(rows, self.dim, CHUNK // 4,
                      lambda ids: _t5_mean(self.params, ids, config=self.config))


@functools.partial(jax.jit, static_argnames="config")
def _t5_mean(params, ids, *, config):
  return t5_mean(params, config, ids)


def load_encoder(path: str, *, weighting: str = "uniform", weights: Optional[np.ndarray] = None,
                 idf_texts: Optional[Sequence[str]] = None,
                 max_lengths: tuple[int, int] = (30, 256)) -> TextEncoder:
  """The encoder in `path` (module docstring): a `t5rank embeddings` directory, whose `weighting`
  "idf" weights words by `weights` or else by `idf_weights(idf_texts)`; else the checkpoint's model
  family's encoder (`t5rank.models.registry`: a dual encoder with its own lengths and uniform
  average, the model trained so; a T5 checkpoint mean-pooled, cut to `max_lengths`)."""

  if weighting not in WEIGHTINGS:
    raise ValueError(f"unknown weighting {weighting!r}; choose one of {WEIGHTINGS}")
  if os.path.isfile(os.path.join(path, "vectors.npy")):
    vocabulary, vectors = load_embeddings(path)
    if weighting == "idf" and weights is None:
      if idf_texts is None:
        raise ValueError("IDF weighting needs the collection's texts (or saved weights)")
      weights = idf_weights(vocabulary, idf_texts)
    return WordAverage(vocabulary, {"query": vectors, "document": vectors},
                       weights=weights if weighting == "idf" else None, max_lengths=max_lengths,
                       source=path)
  if weighting != "uniform":
    raise ValueError(f"{path}: IDF weighting is for `t5rank embeddings` vectors; a trained model "
                     "encodes as it was trained")
  checkpoint = resolve(path)
  family = registry.get(checkpoint.family)
  if family.encoder is None:
    raise ValueError(f"{path} is a {family.name} checkpoint; dense retrieval encodes with a dual "
                     "encoder, word embeddings or a T5 checkpoint")
  return family.part("encoder")(checkpoint, max_lengths=max_lengths)


def dual_encoder_encoder(checkpoint: Checkpoint, **_) -> TextEncoder:
  """A dual encoder checkpoint's f₁ and f₂ (its own lengths, its word list checked)."""

  reranker, params = load_dual_encoder(checkpoint)
  path = checkpoint.path
  config = reranker.config
  query = np.asarray(params["query"]["embedding"])
  document = np.asarray(params["document"]["embedding"]) if "document" in params else query
  return WordAverage(reranker.vocabulary, {"query": query, "document": document},
                     max_lengths=(config.max_query_length, config.max_document_length),
                     source=path)


def t5_dual_encoder_encoder(checkpoint: Checkpoint, **_) -> TextEncoder:
  """A T5 dual encoder checkpoint's mean-pooled T5 encoder, at its own lengths."""

  reranker, params = load_t5_dual_encoder(checkpoint)
  path = checkpoint.path
  config = reranker.config
  return T5Mean(config.t5, params["t5"], reranker.vocab, max_length=config.max_document_length,
                query_length=config.max_query_length, source=path)


def t5_mean_encoder(checkpoint: Checkpoint, *, max_lengths: tuple[int, int] = (30, 256)
                    ) -> TextEncoder:
  """A T5 checkpoint (any format; resolved) as a retriever: its encoder mean-pooled, cut to
  `max_lengths`."""

  reranker, params = load_reranker(checkpoint)
  path = checkpoint.path
  return T5Mean(reranker.config, params, reranker.vocab, max_length=max_lengths[1],
                query_length=max_lengths[0], source=path)
