"""The monoT5 input: `Query: {q} Document: {d} Relevant:` + EOS, cut in the document when too long.

Tokenization is done in four whitespace-separated parts ("Query:", q, "Document:" + d, "Relevant:"):
T5's SentencePiece model splits on whitespace, so the concatenation of the parts' ids equals the ids
of the whole string (a test checks this on real text), and the document can be cut by tokens while
the query prefix and the `Relevant:` suffix stay whole.
"""

from __future__ import annotations

from typing import Sequence

from t5rank.vocab import EOS_ID, Vocabulary

DEFAULT_MAX_LENGTH = 512
TEMPLATE = "Query: {query} Document: {document} Relevant:"


def format_input(query: str, document: str) -> str:
  """The monoT5 input text for one pair (before tokenization)."""
  return TEMPLATE.format(query=query, document=document)


def assemble(query_ids: Sequence[int], document_ids: Sequence[int], marks: "TemplateIds",
             max_length: int = DEFAULT_MAX_LENGTH) -> list[int]:
  """Ids of one input with EOS, at most `max_length` long: the document is cut first; only a query
  too long to leave room for the template is cut itself (its end), never `Relevant:` or EOS."""
  fixed = len(marks.query) + len(marks.document) + len(marks.relevant) + 1
  if fixed > max_length:
    raise ValueError(f"max_length {max_length} cannot hold the template itself ({fixed} tokens)")
  query_ids = list(query_ids)[:max_length - fixed]
  room = max_length - fixed - len(query_ids)
  return (marks.query + query_ids + marks.document + list(document_ids)[:room] + marks.relevant
          + [EOS_ID])


class TemplateIds:
  """The template's fixed words as ids, tokenized once per vocabulary."""

  def __init__(self, vocab: Vocabulary):
    self.query = vocab.encode("Query:")
    self.document = vocab.encode("Document:")
    self.relevant = vocab.encode("Relevant:")


def encode_pairs(vocab: Vocabulary, queries: Sequence[str], documents: Sequence[str],
                 max_length: int = DEFAULT_MAX_LENGTH) -> list[list[int]]:
  """Token ids (with EOS, unpadded) of the monoT5 input for each (query, document) pair."""
  if len(queries) != len(documents):
    raise ValueError(f"{len(queries)} queries but {len(documents)} documents")
  marks = TemplateIds(vocab)
  query_ids = vocab.encode_batch(queries)
  document_ids = vocab.encode_batch(documents)
  return [assemble(q, d, marks, max_length) for q, d in zip(query_ids, document_ids)]


def encode_pair(vocab: Vocabulary, query: str, document: str,
                max_length: int = DEFAULT_MAX_LENGTH) -> list[int]:
  """Token ids (with EOS) of the monoT5 input for one pair."""
  return encode_pairs(vocab, [query], [document], max_length)[0]
