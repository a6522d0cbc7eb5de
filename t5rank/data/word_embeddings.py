"""Word embeddings learned on a collection, for models that read one id per word (TK, the dual
encoder): the texts, the vocabulary of `t5rank.models.words` and gensim's word2vec.

`train_word2vec` learns embeddings on the collection with gensim's word2vec (the TK paper used
GloVe 300-d vectors trained on Common Crawl; nothing can be downloaded here, and the paper itself
notes that embeddings are easy to pre-train on domain data). `make_embeddings` writes the directory
`t5rank embeddings` makes (`t5rank.models.words.save_embeddings`); `insuranceqa_embeddings` is the
TK and dual encoder gins' default word list, built on first use.
"""

from __future__ import annotations

import os
import zlib
from typing import Optional, Sequence

import numpy as np

from t5rank.models.words import (SETTINGS_FILE, WORDS_RULE, WordVocabulary, save_embeddings,
                                 words)
from t5rank.reuse import cached


def _crc32(text: str) -> int:
  return zlib.crc32(text.encode("utf-8"))


def _EpochProgress(epochs: int):
  """A gensim callback printing each finished word2vec epoch (a minute or two on InsuranceQA)."""
  import time

  from gensim.models.callbacks import CallbackAny2Vec

  class EpochProgress(CallbackAny2Vec):
    def __init__(self):
      self.epoch, self.start = 0, time.perf_counter()

    def on_epoch_end(self, model):
      self.epoch += 1
      print(f"word2vec epoch {self.epoch}/{epochs} ({time.perf_counter() - self.start:.0f} s)",
            flush=True)

  return EpochProgress()


def train_word2vec(texts: Sequence[str], vocabulary: WordVocabulary, *, dim: int = 300,
                   epochs: int = 5, window: int = 5, seed: int = 0,
                   workers: int = 1) -> np.ndarray:
  """(vocabulary.size, dim) float32 word2vec (skip-gram, negative sampling) vectors of the
  vocabulary's terms, trained on `texts`; rows 0 (padding) and 1 (unknown) are zero. With one
  worker the vectors are the same on every run (gensim seeds each word's start vector by a hash,
  here CRC-32 instead of Python's salted `hash`)."""
  from gensim.models import Word2Vec

  sentences = [words(t) for t in texts]
  model = Word2Vec(vector_size=dim, window=window, min_count=1, sg=1, negative=5, seed=seed,
                   workers=workers, hashfxn=_crc32)
  known = set(vocabulary.terms)
  model.build_vocab_from_freq({t: c for t, c in zip(vocabulary.terms, vocabulary.counts)
                               if c > 0} or {t: 1 for t in known})
  model.train([[w for w in s if w in known] for s in sentences], total_examples=len(sentences),
              epochs=epochs, callbacks=[_EpochProgress(epochs)])
  vectors = np.zeros((vocabulary.size, dim), np.float32)
  for term, i in vocabulary.index.items():
    if term in model.wv.key_to_index:
      vectors[i] = model.wv[term]
  return vectors


def collection_texts(language: str = "en") -> list[str]:
  """InsuranceQA v2's 27,413 answers and its training questions (no validation or test question):
  the text TK's InsuranceQA embeddings are learned on. `language` en, zh (the translation), or
  enzh (the English texts, then the Chinese)."""
  from t5rank.data.insuranceqa import load_split

  if language == "enzh":
    return collection_texts("en") + collection_texts("zh")
  train = load_split("train", language)
  return list(train.answers.values()) + list(train.queries.values())


def make_embeddings(directory: str, texts: Sequence[str], *, min_count: int = 5, dim: int = 300,
                    epochs: int = 5, seed: int = 0, source: str = "") -> str:
  """Builds the vocabulary of `texts` and their word2vec vectors into `directory`; returns it."""
  vocabulary = WordVocabulary.build(texts, min_count)
  print(f"{len(texts)} texts; {len(vocabulary.terms)} words occur >= {min_count} times "
        f"({sum(vocabulary.counts)} occurrences); word2vec {dim}-d, {epochs} epochs", flush=True)
  vectors = train_word2vec(texts, vocabulary, dim=dim, epochs=epochs, seed=seed)
  save_embeddings(directory, vocabulary, vectors, {
      "source": source, "min_count": min_count, "method": "gensim word2vec skip-gram",
      "epochs": epochs, "seed": seed, "texts": len(texts), "words": WORDS_RULE})
  return directory


def insuranceqa_embeddings(directory: Optional[str] = None, *, language: str = "en",
                           min_count: int = 5, dim: int = 300, epochs: int = 5,
                           seed: int = 0) -> str:
  """`directory` (default runs/words_insuranceqa_{language}_{dim}d), holding InsuranceQA's word
  embeddings (`collection_texts`), built first (word2vec, minutes on a CPU) when it does not hold
  them with these settings. The TK gins' default WORD_EMBEDDINGS, so that they run on a fresh
  clone."""
  if directory is None:
    directory = os.path.join("runs", f"words_insuranceqa_{language}_{dim}d")
  wanted = {"source": f"insuranceqa train ({language}): answers + training questions",
            "min_count": min_count, "epochs": epochs, "seed": seed, "dim": dim,
            "words": WORDS_RULE}

  def build() -> None:
    print(f"building InsuranceQA word embeddings in {directory}", flush=True)
    make_embeddings(directory, collection_texts(language), min_count=min_count, dim=dim,
                    epochs=epochs, seed=seed, source=wanted["source"])

  # a directory made whole (t5rank.reuse): embeddings of other settings are moved aside
  cached(directory, wanted, build, what="InsuranceQA's word embeddings",
         stamp=os.path.join(directory, SETTINGS_FILE), records_key=True,
         complete=lambda path: os.path.isfile(os.path.join(path, SETTINGS_FILE)))
  return directory
