"""Word vocabularies and word embeddings, for models that read one id per word (TK).

    text ─► `words(text)`: lowercased runs of letters and digits (`\\w+`, Unicode), each Chinese
            character a word of its own ─► ids
    id 0 = padding, id 1 = every out-of-vocabulary word, ids 2.. = the vocabulary's terms

A `WordVocabulary` keeps the terms of a collection that occur at least `min_count` times (the TK
paper's "minimum collection occurrence of 5"), most frequent first. It is saved as `words.tsv`
(`term<TAB>count`, one per line, id = line number + 2) beside the embeddings and inside every
checkpoint of a model that reads it, so that scoring tokenizes as training did.

`save_embeddings` / `load_embeddings` write and read the directory `t5rank embeddings` makes:
words.tsv, vectors.npy (float32, one row per id; rows 0 and 1 are zero) and embeddings.json (how it
was made); `t5rank.data.word_embeddings` learns them on a collection.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
from typing import Iterable, Optional, Sequence

import numpy as np
from t5rank.files import atomic_directory, atomic_write, load_array

PAD_ID, UNK_ID = 0, 1
NUM_RESERVED = 2
WORDS_FILE = "words.tsv"
VECTORS_FILE = "vectors.npy"
SETTINGS_FILE = "embeddings.json"
# CJK ideographs: the code point blocks BERT's tokenizer splits into one token per character
# (Chinese is written without spaces; `\w+` alone would make a whole clause one "word").
_CJK = ("\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002ceaf"
        "\U0002f800-\U0002fa1f")
_WORD = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")
# how `words` splits text, recorded with every word list: a list made by another rule is rebuilt
# (an older rule made a run of Chinese characters one word)
WORDS_RULE = "\\w+ runs, each CJK ideograph a word"


def words(text: str) -> list[str]:
  """The lowercased words of `text`: maximal runs of Unicode letters, digits and underscores, and
  each CJK ideograph alone (BERT's rule for Chinese); punctuation and whitespace separate them and
  are dropped. "Is AD&D covered?" -> [is, ad, d, covered]; "寿险covers 2人" -> [寿, 险, covers,
  2, 人]. Text without CJK ideographs is split exactly as by `\\w+`."""
  return _WORD.findall(text.lower())


class WordVocabulary:
  """Terms (index i has id i + 2) with their collection counts."""

  def __init__(self, terms: Sequence[str], counts: Optional[Sequence[int]] = None):
    if len(set(terms)) != len(terms):
      raise ValueError("a word vocabulary lists each term once")
    self.terms = list(terms)
    self.counts = list(counts) if counts is not None else [0] * len(terms)
    self.index = {t: i + NUM_RESERVED for i, t in enumerate(self.terms)}

  @property
  def size(self) -> int:
    """Number of ids, padding and the unknown id included."""
    return len(self.terms) + NUM_RESERVED

  @property
  def sha256(self) -> str:
    """Hash of the terms in id order: two vocabularies with the same hash give the same ids."""
    return hashlib.sha256("\n".join(self.terms).encode("utf-8")).hexdigest()

  @classmethod
  def build(cls, texts: Iterable[str], min_count: int = 5) -> "WordVocabulary":
    """The terms of `texts` occurring at least `min_count` times, by count (descending), ties by
    term."""
    if min_count < 1:
      raise ValueError(f"min_count must be at least 1, got {min_count}")
    counts = collections.Counter(w for text in texts for w in words(text))
    kept = sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
    return cls(kept, [counts[t] for t in kept])

  def encode(self, text: str, max_length: int) -> tuple[np.ndarray, int, int]:
    """(ids (n,) int32 of the first `max_length` words, their out-of-vocabulary count, n)."""
    ids = np.fromiter((self.index.get(w, UNK_ID) for w in words(text)[:max_length]), np.int32)
    return ids, int((ids == UNK_ID).sum()), len(ids)

  def save(self, path: str) -> None:
    """words.tsv at `path` (written to a temporary name, then renamed)."""

    with atomic_write(path) as f:
      f.writelines(f"{term}\t{count}\n" for term, count in zip(self.terms, self.counts))

  @classmethod
  def load(cls, path: str) -> "WordVocabulary":
    """The vocabulary `save` wrote to `path` (a words.tsv, or a directory holding one)."""
    if os.path.isdir(path):
      path = os.path.join(path, WORDS_FILE)
    if not os.path.isfile(path):
      raise FileNotFoundError(f"{path}: no word vocabulary (words.tsv, made by `t5rank embeddings`)")
    terms, counts = [], []
    with open(path, encoding="utf-8") as f:
      for number, line in enumerate(f, 1):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 2 or not parts[0] or not parts[1].isdigit():
          raise ValueError(f"{path}:{number}: expected term<TAB>count, got {line.rstrip()!r}")
        terms.append(parts[0])
        counts.append(int(parts[1]))
    return cls(terms, counts)


def load_words(config, path: Optional[str] = None) -> WordVocabulary:
  """The word list in `path` (default `config.words`: a `t5rank embeddings` directory, a
  checkpoint or a words.tsv), checked against the model config (`check_words`)."""
  name = type(config).__name__
  path = path or config.words
  if not path:
    raise ValueError(f"{name}.words is empty: build the config from a word list (words=DIR, DIR "
                     "made by `t5rank embeddings`)")
  vocabulary = WordVocabulary.load(path)
  check_words(vocabulary, config, os.path.join(path, WORDS_FILE) if os.path.isdir(path) else path)
  return vocabulary


def check_words(vocabulary: WordVocabulary, config, source: str = "the word vocabulary") -> None:
  """Raises ValueError naming `source` unless `vocabulary` has the config's `vocab_size` and
  `vocabulary_sha256` (TK, the dual encoder): a cut or foreign word list gives other ids."""
  if vocabulary.size != config.vocab_size or (
      config.vocabulary_sha256 and vocabulary.sha256 != config.vocabulary_sha256):
    raise ValueError(f"{source} ({vocabulary.size} ids, sha256 {vocabulary.sha256[:12]}) is not "
                     f"the word list this {type(config).__name__} was built with "
                     f"({config.vocab_size} ids, sha256 {config.vocabulary_sha256[:12]})")


def save_embeddings(directory: str, vocabulary: WordVocabulary, vectors: np.ndarray,
                    settings: dict) -> None:
  """Writes words.tsv, vectors.npy and embeddings.json into `directory` (built in a temporary
  directory beside it, then renamed: an interrupted run leaves no half-written directory)."""

  if vectors.shape[0] != vocabulary.size:
    raise ValueError(f"{vectors.shape[0]} vectors for a vocabulary of {vocabulary.size} ids")
  with atomic_directory(directory) as temporary:
    vocabulary.save(os.path.join(temporary, WORDS_FILE))
    np.save(os.path.join(temporary, VECTORS_FILE), vectors.astype(np.float32))
    with open(os.path.join(temporary, SETTINGS_FILE), "w") as f:
      json.dump(dict(settings, vocabulary_sha256=vocabulary.sha256, terms=len(vocabulary.terms),
                     dim=int(vectors.shape[1])), f, indent=1)


def load_embeddings(directory: str) -> tuple[WordVocabulary, np.ndarray]:
  """(vocabulary, vectors) of a directory `save_embeddings` wrote."""

  vocabulary = WordVocabulary.load(directory)
  path = os.path.join(directory, VECTORS_FILE)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path} not found: {directory} holds no word vectors")
  vectors = load_array(path)
  if vectors.ndim != 2 or vectors.shape[0] != vocabulary.size:
    raise ValueError(f"{path}: shape {vectors.shape}, expected ({vocabulary.size}, dim) for the "
                     f"{len(vocabulary.terms)} terms of {WORDS_FILE} + 2 reserved ids")
  bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
  if len(bad):
    word = vocabulary.terms[bad[0] - NUM_RESERVED] if bad[0] >= NUM_RESERVED else f"id {bad[0]}"
    raise ValueError(f"{path}: {len(bad)} row(s) hold NaN or inf, e.g. the vector of {word!r}")
  return vocabulary, vectors
