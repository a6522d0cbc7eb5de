"""SentencePiece vocabularies in T5's id layout, and the registry of monoT5 target words.

Ids: pad 0, eos 1, unk 2, then the SentencePiece pieces, then `extra_ids` `<extra_id_N>` sentinels
counted down from the top (`<extra_id_0>` is the last id), as T5 and SeqIO lay them out. This module
uses the `sentencepiece` package only (no TensorFlow), so that the scoring path stays light; SeqIO
tasks use `seqio.SentencePieceVocabulary` on the same file, and a test checks both give the same
ids.

Vocabularies by name (`VOCABULARIES`; anything else is a path to a SentencePiece model):
  t5                  T5's 32,000 pieces + 100 sentinels (the default)
  insuranceqa_en_8k   8,000 pieces of InsuranceQA's English answers and training queries, no
                      sentinels (scripts/make_insuranceqa_vocab.py)
  insuranceqa_en_8k_sentinels  the same 8,000 pieces + 100 sentinels (ids 8,000-8,099,
                      `<extra_id_0>` = 8,099), for span-corruption pre-training; a model pre-trained
                      on it fine-tunes on the `_8k` tasks (same pieces, same ids)
  mt5                 mT5's 250,000 pieces + 100 sentinels (Xue et al. 2021), not shipped (4 MB):
                      the file named by $T5RANK_MT5_VOCAB, else ~/.cache/t5rank/mt5_spiece.model;
                      fetch it with `gsutil cp gs://t5-data/vocabs/mc4.250000.100extra/sentencepiece.model`
  insuranceqa_enzh_16k  16,000 pieces of English and Chinese (InsuranceQA's answers and training
                      queries in both languages, Tatoeba's train sentences) + 100 sentinels
                      (16,000-16,099), for cross-lingual reranking (scripts/make_bilingual_vocab.py)
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import Optional, Sequence, Union

import sentencepiece as spm

PAD_ID, EOS_ID, UNK_ID = 0, 1, 2
DEFAULT_EXTRA_IDS = 100
DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
DEFAULT_SPM_PATH = os.path.join(DATA_DIR, "t5_spiece.model")
DEFAULT_VOCABULARY = "t5"
# name -> (SentencePiece model, extra ids). T5's sentinels serve its span-corruption pre-training;
# a vocabulary trained for monoT5 from scratch needs none, one for pre-training needs them.
VOCABULARIES: dict[str, tuple[str, int]] = {
    "t5": (DEFAULT_SPM_PATH, DEFAULT_EXTRA_IDS),
    "insuranceqa_en_8k": (os.path.join(DATA_DIR, "insuranceqa_en_8k.model"), 0),
    "insuranceqa_en_8k_sentinels": (os.path.join(DATA_DIR, "insuranceqa_en_8k.model"),
                                    DEFAULT_EXTRA_IDS),
    "insuranceqa_enzh_16k": (os.path.join(DATA_DIR, "insuranceqa_enzh_16k.model"),
                             DEFAULT_EXTRA_IDS),
}


MT5_VOCABULARY_ENV = "T5RANK_MT5_VOCAB"
MT5_VOCABULARY_URL = "gs://t5-data/vocabs/mc4.250000.100extra/sentencepiece.model"


def mt5_vocabulary_path() -> str:
  """Where mT5's SentencePiece model is looked for: $T5RANK_MT5_VOCAB, else the cache (the file is
  only read when used, so tasks on it register without it)."""
  return os.environ.get(MT5_VOCABULARY_ENV) or os.path.join(
      os.environ.get("T5RANK_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "t5rank"),
      "mt5_spiece.model")


class Vocabulary:
  """A T5 SentencePiece vocabulary (no BOS, EOS appended by the caller) plus extra ids."""

  def __init__(self, path: str = DEFAULT_SPM_PATH, extra_ids: int = DEFAULT_EXTRA_IDS):
    if not os.path.exists(path):
      hint = ""
      if path == mt5_vocabulary_path():
        hint = (f" (mT5's vocabulary: copy {MT5_VOCABULARY_URL} there, or set "
                f"{MT5_VOCABULARY_ENV} to its path)")
      raise FileNotFoundError(f"SentencePiece model not found: {path}{hint}")
    with open(path, "rb") as f:
      self.model_proto = f.read()
    self.path = path
    self.extra_ids = extra_ids
    self._sp = spm.SentencePieceProcessor(model_proto=self.model_proto)
    layout = (self._sp.pad_id(), self._sp.eos_id(), self._sp.unk_id())
    if layout != (PAD_ID, EOS_ID, UNK_ID):
      raise ValueError(f"{path}: expected T5's id layout pad/eos/unk = 0/1/2, got {layout}")

  @functools.cached_property
  def sha256(self) -> str:
    return hashlib.sha256(self.model_proto).hexdigest()

  @property
  def base_vocab_size(self) -> int:
    """Number of SentencePiece pieces (without the extra ids)."""
    return self._sp.get_piece_size()

  @property
  def vocab_size(self) -> int:
    """Pieces plus extra ids; the model's embedding may have more (padded) rows."""
    return self.base_vocab_size + self.extra_ids

  def encode(self, text: str) -> list[int]:
    """Text -> piece ids, without EOS."""
    return self._sp.encode(text)

  def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
    """Many texts -> piece ids (SentencePiece's own threads), without EOS."""
    return self._sp.encode(list(texts), num_threads=num_threads)

  def pieces(self, text: str) -> list[str]:
    return self._sp.encode(text, out_type=str)

  def id_to_piece(self, token_id: int) -> str:
    if token_id >= self.base_vocab_size:
      return f"<extra_id_{self.vocab_size - 1 - token_id}>"
    return self._sp.id_to_piece(token_id)

  def piece_to_id(self, piece: str) -> int:
    """Exact piece -> id; raises KeyError for a piece the vocabulary does not have."""
    if piece.startswith("<extra_id_") and piece.endswith(">"):
      return self.vocab_size - 1 - int(piece[len("<extra_id_"):-1])
    token_id = self._sp.piece_to_id(piece)
    if token_id == UNK_ID and piece != self._sp.id_to_piece(UNK_ID):
      raise KeyError(f"piece {piece!r} is not in the vocabulary {self.path}")
    return token_id

  def decode(self, ids: Sequence[int]) -> str:
    """Ids -> text; stops at EOS, skips padding, writes extra ids as `<extra_id_N>`."""
    out, run = [], []
    for token_id in ids:
      token_id = int(token_id)
      if token_id == EOS_ID:
        break
      if token_id == PAD_ID:
        continue
      if token_id >= self.base_vocab_size:
        out.append(self._sp.decode(run))
        run = []
        out.append(self.id_to_piece(token_id))
      else:
        run.append(token_id)
    out.append(self._sp.decode(run))
    return "".join(out)


def vocabulary_file(vocabulary: str, extra_ids: Optional[int] = None) -> tuple[str, int]:
  """(SentencePiece model path, extra ids) of a name of `VOCABULARIES` or of a model's path;
  `extra_ids` defaults to the name's, and to T5's 100 for a path."""
  if vocabulary == "mt5":
    path, default = mt5_vocabulary_path(), DEFAULT_EXTRA_IDS
  elif vocabulary in VOCABULARIES:
    path, default = VOCABULARIES[vocabulary]
  elif os.path.isfile(vocabulary):
    path, default = vocabulary, DEFAULT_EXTRA_IDS
  elif vocabulary == mt5_vocabulary_path():
    raise FileNotFoundError(f"mT5's vocabulary is not at {vocabulary}: copy {MT5_VOCABULARY_URL} "
                            f"there, or set {MT5_VOCABULARY_ENV} to its path")
  else:
    names = ", ".join([*VOCABULARIES, "mt5"])
    raise FileNotFoundError(f"vocabulary {vocabulary!r} is neither a name ({names}) nor a "
                            "SentencePiece model file")
  return path, default if extra_ids is None else extra_ids


@functools.lru_cache(maxsize=8)
def load_vocabulary(vocabulary: str = DEFAULT_VOCABULARY,
                    extra_ids: Optional[int] = None) -> Vocabulary:
  """A cached `Vocabulary` for a name of `VOCABULARIES` or a SentencePiece model path (see
  `vocabulary_file` for the extra ids)."""
  return Vocabulary(*vocabulary_file(vocabulary, extra_ids))


# The paper's Table 4 (positive word first: the target when the document is relevant) and mT5's.
TARGET_WORDS: dict[str, tuple[str, str]] = {
    "true_false": ("true", "false"),
    "false_true": ("false", "true"),
    "hot_cold": ("hot", "cold"),
    "apple_orange": ("apple", "orange"),
    "hot_orange": ("hot", "orange"),
    "ab_de": ("▁ab", "▁de"),
    "yes_no": ("yes", "no"),
}


class TargetWordError(ValueError):
  """A target word that is not exactly one vocabulary piece."""


def target_word_id(vocab: Vocabulary, word: str) -> int:
  """The id of `word` as one piece: a literal piece (`▁ab`) or a word that encodes to one piece."""
  if word.startswith("▁"):
    try:
      return vocab.piece_to_id(word)
    except KeyError:
      raise TargetWordError(f"target word {word!r} is not a piece of {vocab.path}") from None
  pieces = vocab.pieces(word)
  if len(pieces) != 1:
    raise TargetWordError(
        f"target word {word!r} must be one vocabulary piece, but {vocab.path} splits it into "
        f"{len(pieces)} pieces {pieces}")
  return vocab.piece_to_id(pieces[0])


TargetSpec = Union[str, Sequence[str]]


def resolve_target_words(vocab: Vocabulary, targets: TargetSpec) -> tuple[int, int]:
  """(positive id, negative id) for a registry name (`"true_false"`) or a (positive, negative) pair."""
  if isinstance(targets, str):
    if targets not in TARGET_WORDS:
      raise KeyError(f"unknown target words {targets!r}; choose one of {sorted(TARGET_WORDS)} "
                     "or give a (positive, negative) pair")
    targets = TARGET_WORDS[targets]
  if len(targets) != 2:
    raise ValueError(f"target words must be a (positive, negative) pair, got {targets!r}")
  positive, negative = (target_word_id(vocab, w) for w in targets)
  if positive == negative:
    raise TargetWordError(f"target words {targets!r} map to the same piece id {positive}")
  return positive, negative
