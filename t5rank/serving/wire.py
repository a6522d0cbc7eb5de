"""The two request shapes the server speaks, read into one `Query`, and their answers.

    POST /rerank     text-embeddings-inference's: {"query": "...", "texts": ["...", ...],
                     "return_text": false, "raw_scores": false}
                     -> [{"index": 1, "score": 0.93[, "text": "..."]}, ...] best first
    POST /v1/rerank  Cohere's (Infinity, OpenVINO Model Server): {"query": "...", "documents":
                     ["...", ...] (or {"text": "..."} objects), "top_n": 3, "return_documents":
                     false} -> {"id": "...", "results": [{"index": 1, "relevance_score": 0.93[,
                     "document": {"text": "..."}]}, ...], "meta": {...}}
    POST /v2/rerank  the same, where Cohere's v2 clients send it (`cohere.ClientV2`, LangChain's
                     CohereRerank with a base_url)

Both take `first_stage_scores` (one BM25 score per text), which a model trained with the BM25
score in its input (the shipped monoT5, RankT5 and duoT5) needs. Fields the shapes define but
t5rank has no use for (TEI's `truncate`, Cohere's `model`, `max_chunks_per_doc`,
`max_tokens_per_doc`) and unknown fields are ignored:
a text is always cut to the model's max_length, as `t5rank score` cuts it.

`score` (TEI with raw_scores) is the score `t5rank score` writes; the normalized score (TEI's
default, Cohere's relevance_score) is in (0, 1] with the same order: exp(score) for a model whose
score is a log-probability (monoT5, the classifier: P(relevant)), TEI's sigmoid(score) for the
others. Every refusal is a `RequestError`: an HTTP status and one line naming what to change.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from typing import Any, Optional


class RequestError(Exception):
  """A request refused: `status` (400 unreadable, 413 past a limit, 422 not what a field takes)
  and a one-line message."""

  def __init__(self, status: int, message: str):
    super().__init__(message)
    self.status = status


@dataclasses.dataclass(frozen=True)
class Limits:
  """What one request may hold: `max_texts` texts of at most `max_chars` characters each (and a
  query of at most `max_chars`)."""
  max_texts: int = 1000
  max_chars: int = 10_000

  def __post_init__(self):
    if self.max_texts < 1 or self.max_chars < 1:
      raise ValueError(f"max_texts and max_chars must be positive, got {self.max_texts}, "
                       f"{self.max_chars}")

  @property
  def max_body_bytes(self) -> int:
    """The largest body read: every text and the query at the limit, each character written as a
    JSON escape (6 bytes), and 64 KiB for the rest."""
    return (self.max_texts + 1) * (6 * self.max_chars + 32) + 65536


@dataclasses.dataclass(frozen=True)
class Query:
  """A request in either shape: `texts` to rank for `query`, the first `top_n` (None: all)."""
  query: str
  texts: list[str]
  first_stage_scores: Optional[list[float]]
  top_n: Optional[int]
  return_texts: bool
  raw_scores: bool


def parse_body(body: bytes) -> dict:
  """The JSON object of a request body; RequestError 400 when it is not UTF-8 or not JSON, 422
  when it is JSON but not an object."""
  try:
    text = body.decode("utf-8")
  except UnicodeDecodeError as e:
    raise RequestError(400, f"the body is not UTF-8 (byte {e.start}): send JSON in UTF-8") from None
  if not text.strip():
    raise RequestError(400, "the body is empty: send a JSON object")
  try:
    value = json.loads(text, parse_constant=_no_constant)
  except json.JSONDecodeError as e:
    raise RequestError(400, f"the body is not JSON: {e.msg} at line {e.lineno} column "
                            f"{e.colno}") from None
  except ValueError as e:  # NaN, Infinity
    raise RequestError(400, f"the body is not JSON: {e}") from None
  except RecursionError:
    raise RequestError(400, "the body is not JSON this server reads: nested too deeply") from None
  if not isinstance(value, dict):
    raise RequestError(422, f"the body must be a JSON object, got {_kind(value)}")
  return value


def read_tei(body: dict, limits: Limits) -> Query:
  """A text-embeddings-inference /rerank body (module docstring)."""
  texts = _texts(body, "texts", limits)
  return Query(query=_query(body, limits), texts=texts,
               first_stage_scores=_scores(body, len(texts)), top_n=None,
               return_texts=_flag(body, "return_text"), raw_scores=_flag(body, "raw_scores"))


def read_cohere(body: dict, limits: Limits) -> Query:
  """A Cohere /v1/rerank body (module docstring)."""
  documents = body.get("documents")
  if isinstance(documents, list):  # Cohere's {"text": ...} objects, as strings
    documents = [d["text"] if isinstance(d, dict) and isinstance(d.get("text"), str) else d
                 for d in documents]
    body = {**body, "documents": documents}
  texts = _texts(body, "documents", limits)
  top_n = body.get("top_n")
  if top_n is not None and (not isinstance(top_n, int) or isinstance(top_n, bool) or top_n < 1):
    raise RequestError(422, f"top_n must be a positive integer, got {json.dumps(top_n)[:40]}")
  return Query(query=_query(body, limits), texts=texts,
               first_stage_scores=_scores(body, len(texts)), top_n=top_n,
               return_texts=_flag(body, "return_documents"), raw_scores=False)


def is_log_probability(family: str) -> bool:
  """Whether the scores of `family` are log-probabilities (`Reranker.log_probability`)."""
  from t5rank.models import registry

  return registry.get(family).reranker.log_probability


def relevance(score: float, family: str) -> float:
  """The normalized score (module docstring): in (0, 1], in the order of `score`."""
  if is_log_probability(family):
    return math.exp(min(score, 0.0))
  return 0.5 * (1.0 + math.tanh(0.5 * score))  # sigmoid, without overflow


def tei_answer(query: Query, ranking: list[tuple[int, float]], family: str, **_) -> list[dict]:
  """TEI's answer: [{"index", "score"[, "text"]}, ...] best first."""
  return [{"index": index, "score": score if query.raw_scores else relevance(score, family),
           **({"text": query.texts[index]} if query.return_texts else {})}
          for index, score in ranking[:query.top_n]]


def cohere_answer(query: Query, ranking: list[tuple[int, float]], family: str,
                  version: str = "1", checkpoint: str = "", tokens: int = 0) -> dict:
  """Cohere's answer: {"id", "results": [{"index", "relevance_score"[, "document"]}], "meta"}
  (`version`: of Cohere's API, "1" or "2"), with Jina's top-level "model" (`checkpoint`) and
  "usage": {"total_tokens": the model's input tokens} beside them (Jina's clients, Haystack's
  JinaRanker and gateways of its shape read them; Cohere's ignore them)."""
  results = [{"index": index, "relevance_score": relevance(score, family),
              **({"document": {"text": query.texts[index]}} if query.return_texts else {})}
             for index, score in ranking[:query.top_n]]
  return {"id": str(uuid.uuid4()), "results": results, "model": checkpoint,
          "usage": {"total_tokens": tokens},
          "meta": {"api_version": {"version": version}, "billed_units": {"search_units": 1}}}


def count_tokens(example) -> int:
  """The token ids of one encoded model input (a sequence of ids, or a tuple of them, as TK's
  query and document); 0 for what holds none."""
  if isinstance(example, tuple):
    return sum(count_tokens(part) for part in example)
  return len(example) if hasattr(example, "__len__") else 0


def _no_constant(name: str):
  raise ValueError(f"{name} is not a JSON number")


def _kind(value: Any) -> str:
  return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
          type(None): "null"}.get(type(value), "a number")


def _query(body: dict, limits: Limits) -> str:
  query = body.get("query")
  if not isinstance(query, str):
    raise RequestError(422, "query must be a string" + (", and is missing" if query is None
                                                        else f", got {_kind(query)}"))
  if len(query) > limits.max_chars:
    raise RequestError(413, f"the query has {len(query)} characters, more than --max-chars "
                            f"{limits.max_chars}")
  _check_unicode(query, "the query")
  return query


def _texts(body: dict, field: str, limits: Limits) -> list[str]:
  texts = body.get(field)
  if not isinstance(texts, list):
    raise RequestError(422, f"{field} must be an array of strings" + (
        ", and is missing" if texts is None else f", got {_kind(texts)}"))
  if not texts:
    raise RequestError(422, f"{field} is empty: send at least one text to rank")
  if len(texts) > limits.max_texts:
    raise RequestError(413, f"{field} has {len(texts)} texts, more than --max-texts "
                            f"{limits.max_texts}: split the request")
  for i, text in enumerate(texts):
    if not isinstance(text, str):
      raise RequestError(422, f"{field}[{i}] must be a string, got {_kind(text)}")
    if len(text) > limits.max_chars:
      raise RequestError(413, f"{field}[{i}] has {len(text)} characters, more than --max-chars "
                              f"{limits.max_chars}: cut it into passages")
    _check_unicode(text, f"{field}[{i}]")
  return texts


def _scores(body: dict, n: int) -> Optional[list[float]]:
  scores = body.get("first_stage_scores")
  if scores is None:
    return None
  if not isinstance(scores, list) or len(scores) != n or not all(
      isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s)
      for s in scores):
    raise RequestError(422, f"first_stage_scores must be an array of {n} finite numbers, one "
                            "BM25 score per text")
  return [float(s) for s in scores]


def _flag(body: dict, field: str) -> bool:
  value = body.get(field, False)
  if not isinstance(value, bool):
    raise RequestError(422, f"{field} must be true or false, got {json.dumps(value)[:40]}")
  return value


def _check_unicode(text: str, name: str) -> None:
  try:
    text.encode("utf-8")
  except UnicodeEncodeError:
    raise RequestError(422, f"{name} holds a lone surrogate (\\ud800-\\udfff), not a "
                            "character") from None
