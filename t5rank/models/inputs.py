"""The monoT5 input: `Query: {q} Document: {d} Relevant:` + EOS, cut in the document when too long.

With the first-stage score in the input (Askari et al., ECIR 2023, "Injecting the BM25 Score as
Text Improves BERT-Based Re-rankers"), the BM25 score of the pair, rounded to an integer, is written
between the query and the document: `Query: {q} BM25: {s} Document: {d} Relevant:`. The monoT5
score itself (two-logit softmax) is unchanged; only the text the model reads differs.

Tokenization is done in four whitespace-separated parts ("Query:", q, "Document:" + d, "Relevant:"):
T5's SentencePiece model splits on whitespace, so the concatenation of the parts' ids equals the ids
of the whole string (a test checks this on real text), and the document can be cut by tokens while
the query prefix and the `Relevant:` suffix stay whole.

Past `max_length`, t5rank cuts the document (`truncation="document"`, the default): the query,
`Relevant:` and EOS are always read. pygaggle and transformers' T5 tokenizer (`truncation=True,
max_length=512`) cut the whole input instead (`truncation="input"`): its first max_length − 1 ids,
then EOS, so that an input past the limit loses `Relevant:` and the scores differ (issue #67: up
to 6.1 in log P for a 600-token document). Below max_length both are the same ids.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from t5rank.models.vocab import EOS_ID, Vocabulary

DEFAULT_MAX_LENGTH = 512
TRUNCATIONS = ("document", "input")  # what is cut past max_length (module docstring)
TEMPLATE = "Query: {query} Document: {document} Relevant:"
SCORE_MARK = "BM25:"


def score_text(score: float) -> str:
  """The first-stage score as the input writes it: `BM25: 12` (rounded half to even, as Python's
  `round` and `tf.round` both do)."""
  if not np.isfinite(score) or score < 0:
    raise ValueError(f"a BM25 score must be a finite number >= 0, got {score!r}")
  return f"{SCORE_MARK} {round(float(score))}"


def format_input(query: str, document: str, score: Optional[float] = None) -> str:
  """The monoT5 input text for one pair (before tokenization); with `score`, the first-stage score
  goes between the query and the document."""
  if score is not None:
    query = f"{query} {score_text(score)}"
  return TEMPLATE.format(query=query, document=document)


def check_truncation(truncation: str) -> str:
  """`truncation` if it is one of TRUNCATIONS, else ValueError."""
  if truncation not in TRUNCATIONS:
    raise ValueError(f"truncation must be one of {', '.join(TRUNCATIONS)}, got {truncation!r}")
  return truncation


def cut_input(ids: Sequence[int], max_length: int) -> list[int]:
  """transformers' T5 tokenizer's cut (`truncation="input"`): the first max_length − 1 of the
  whole input's ids, then EOS."""
  return list(ids)[:max_length - 1] + [EOS_ID]


def assemble(query_ids: Sequence[int], document_ids: Sequence[int], marks: "TemplateIds",
             max_length: int = DEFAULT_MAX_LENGTH, score_ids: Sequence[int] = (),
             truncation: str = "document") -> list[int]:
  """Ids of one input with EOS, at most `max_length` long: the document is cut first; only a query
  too long to leave room for the template is cut itself (its end), never the score (`score_ids`,
  the ids of `score_text`), `Relevant:` or EOS. `truncation="input"`: the whole input is cut
  (`cut_input`), as pygaggle's."""
  if truncation == "input":
    return cut_input(marks.query + list(query_ids) + list(score_ids) + marks.document
                     + list(document_ids) + marks.relevant, max_length)
  fixed = len(marks.query) + len(score_ids) + len(marks.document) + len(marks.relevant) + 1
  if fixed > max_length:
    raise ValueError(f"max_length {max_length} cannot hold the template itself ({fixed} tokens)")
  query_ids = list(query_ids)[:max_length - fixed]
  room = max_length - fixed - len(query_ids)
  return (marks.query + query_ids + list(score_ids) + marks.document + list(document_ids)[:room]
          + marks.relevant + [EOS_ID])


class TemplateIds:
  """The template's fixed words as ids, tokenized once per vocabulary."""

  def __init__(self, vocab: Vocabulary):
    self.query = vocab.encode("Query:")
    self.document = vocab.encode("Document:")
    self.relevant = vocab.encode("Relevant:")


class ScoreIds:
  """`score_text(s)` as ids, tokenized once per distinct rounded score."""

  def __init__(self, vocab: Vocabulary):
    self.vocab = vocab
    self.cache: dict[str, list[int]] = {}

  def __call__(self, score: float) -> list[int]:
    text = score_text(score)
    if text not in self.cache:
      self.cache[text] = self.vocab.encode(text)
    return self.cache[text]


def encode_pairs(vocab: Vocabulary, queries: Sequence[str], documents: Sequence[str],
                 max_length: int = DEFAULT_MAX_LENGTH,
                 scores: Optional[Sequence[float]] = None,
                 truncation: str = "document") -> list[list[int]]:
  """Token ids (with EOS, unpadded) of the monoT5 input for each (query, document) pair; with
  `scores`, each pair's first-stage score is written into its input; cut past `max_length` as
  `truncation` says (`assemble`)."""
  if len(queries) != len(documents):
    raise ValueError(f"{len(queries)} queries but {len(documents)} documents")
  if scores is not None and len(scores) != len(queries):
    raise ValueError(f"{len(queries)} pairs but {len(scores)} scores")
  marks = TemplateIds(vocab)
  query_ids = vocab.encode_batch(queries)
  document_ids = vocab.encode_batch(documents)
  score_ids = ScoreIds(vocab)
  return [assemble(q, d, marks, max_length, score_ids(scores[i]) if scores is not None else (),
                   truncation) for i, (q, d) in enumerate(zip(query_ids, document_ids))]


def encode_pair(vocab: Vocabulary, query: str, document: str,
                max_length: int = DEFAULT_MAX_LENGTH, score: Optional[float] = None) -> list[int]:
  """Token ids (with EOS) of the monoT5 input for one pair."""
  return encode_pairs(vocab, [query], [document], max_length,
                      None if score is None else [score])[0]
