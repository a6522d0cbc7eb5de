"""The one interface every reranker serves: `t5rank score`, training-time evaluation, the demo and
the benchmarks only talk to a `Reranker`.

    pairs (query text, passage text[, first-stage score]) ─► reranker.encode ─► examples
    ─► reranker.batches (its own shapes: length buckets, row counts) ─► Batch(items, arrays)
    ─► reranker.score_batch(params, arrays) on the device mesh ─► (score, probability) per row

A reranker holds its configuration, tokenizer and options, not its parameters: `params` travel
beside it, so that the trainer can evaluate the parameters it is training and the scorer can place
them on a mesh (`param_axes` names each parameter's logical axes for `t5rank.partitioning`).
`t5rank.models.loading.load_reranker(checkpoint)` reads any checkpoint t5rank knows and
returns the reranker its metadata names (monoT5 when it names none) with its parameters; the
families are in `t5rank.models.registry`.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np


class Batch(NamedTuple):
  """Rows `items` (indices into the encoded examples) of the padded `arrays`; arrays have at least
  len(items) rows, the rest padding whose scores are dropped."""
  items: np.ndarray
  arrays: tuple[np.ndarray, ...]


class Reranker(abc.ABC):
  """A model that scores (query, passage) pairs. Subclasses set `name` (the `model` key of a
  checkpoint's metadata.json) and implement the abstract methods; `score_batch` must be a pure,
  jitted function of the parameters and the arrays."""

  name: str = ""
  # How the scorer orders a job's pairs before cutting them into shards: "query" (the run's order)
  # or "passage" (each passage's pairs together, for models that contextualize a passage once).
  shard_order: str = "query"
  # How the scorer turns each query's candidates into this reranker's inputs and their scores back
  # into a ranking: a `t5rank.ranking.jobs.ScoringJob` class, by dotted name (`t5rank.models`
  # imports nothing above it). The default scores each candidate's sentence windows and aggregates
  # them (MaxP); duoT5's scores every ordered pair of a query's candidates.
  job: str = "t5rank.ranking.jobs.PassageJob"
  # What a score means: a log-probability (<= 0; exp gives the probability the service returns as
  # its normalized score) or any real number, higher better (the service's normalized score is its
  # sigmoid). Serve and the cascade read it; nothing lists the families of either kind.
  log_probability: bool = False
  # The width of its activations per token (T5's d_model), which sizes its batches on a CPU
  # (`t5rank.ranking.devices.default_batch_tokens`); None: the CPU's default size.
  width: Optional[int] = None

  @abc.abstractmethod
  def encode(self, queries: Sequence[str], passages: Sequence[str],
             first_stage: Optional[Sequence[float]] = None) -> list[Any]:
    """One model example per (query, passage) pair; `first_stage` gives each pair's first-stage
    score for models that read it (as the reranker's `job` makes them: duoT5's passage is a
    (d0, d1) pair and its first-stage entry their two scores)."""

  @abc.abstractmethod
  def batches(self, examples: Sequence[Any], *, batch_tokens: int, row_multiple: int = 1,
              length_bucket: Optional[int] = None) -> list[Batch]:
    """The examples padded into batches of about `batch_tokens` padded tokens, row counts a
    multiple of `row_multiple` (the data-parallel devices), lengths padded to a multiple of
    `length_bucket` (None: the model's own; larger: fewer shapes to compile, more padding), every
    example in exactly one batch."""

  @abc.abstractmethod
  def score_batch(self, params, arrays: Sequence[Any]) -> tuple[Any, Any]:
    """(score, probability), each (B,), of a batch's padded arrays; higher score = more relevant.
    `params` is what `shard_state` returned for the shard."""

  @abc.abstractmethod
  def param_axes(self) -> Any:
    """The logical axis names of every parameter (a pytree like the parameters)."""

  @abc.abstractmethod
  def fingerprint(self) -> dict:
    """Everything besides the parameters that decides the scores (architecture, vocabulary,
    options), as JSON-able values: a resumed scoring job must see the same."""

  @property
  @abc.abstractmethod
  def reads_first_stage(self) -> bool:
    """Whether `encode` needs each pair's first-stage score."""

  def describe(self) -> str:
    """One line for logs."""
    return self.name

  @classmethod
  def for_evaluation(cls, config: Any, **options: Any) -> "Reranker":
    """The reranker of a model config being trained, as training-time evaluation scores it
    (`options`: the evaluation's vocab, target_ids, max_length, bm25_in_input; each model takes
    what it reads)."""
    raise NotImplementedError(f"{cls.__name__} cannot be evaluated during training")

  def shard_state(self, params, examples: Sequence[Any], *, mesh,
                  batch_tokens: Optional[int] = None, length_bucket: Optional[int] = None) -> Any:
    """What `score_batch` receives in place of `params` for the batches of `examples` (one shard):
    by default the parameters; a model that encodes queries on their own (TK) contextualizes the
    shard's queries here, once, and one that encodes both sides on their own (the dual encoder)
    each distinct text, in batches of about `batch_tokens` padded tokens (None: the mesh's
    default) and lengths padded to multiples of `length_bucket` (None: the model's own)."""
    del examples, mesh, batch_tokens, length_bucket
    return params

  def program_shapes(self, examples: Sequence[Any], *, batch_tokens: int, row_multiple: int = 1,
                     length_bucket: Optional[int] = None) -> tuple:
    """The shapes of the programs that scoring `examples` compiles, sorted (what `t5rank serve`'s
    warm-up probes): by default each batch's array shapes; a model that computes in
    `shard_state` adds those programs'."""
    return tuple(sorted({tuple(a.shape for a in batch.arrays) for batch in self.batches(
        examples, batch_tokens=batch_tokens, row_multiple=row_multiple,
        length_bucket=length_bucket)}))


def cast_params(params, dtype: Optional[str]):
  """`params` with every floating-point array cast to `dtype` ("float32", "bfloat16"); None or
  "float32" of float32 parameters leaves them as they are."""
  import jax
  import jax.numpy as jnp

  if dtype is None:
    return params
  target = jnp.dtype(dtype)
  return jax.tree.map(
      lambda x: x.astype(target) if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != target
      else x, params)


def encode_distinct(texts: Sequence[str], encode: Callable[[str], Any]) -> list[Any]:
  """[encode(t) for t in texts], calling `encode` once per distinct text (a run's candidates
  repeat: each InsuranceQA answer is in about 15 pools)."""
  cache: dict[str, Any] = {}
  return [cache[t] if t in cache else cache.setdefault(t, encode(t)) for t in texts]
