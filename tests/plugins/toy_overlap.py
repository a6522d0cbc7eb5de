"""A reranker defined outside t5rank, as docs/adding_a_model.md builds it: one module that declares
its family by name, states what its score means, and registers itself through the public API
(`t5rank.models.registry.register`). tests/test_adding_a_model.py scores it with `t5rank score`,
`t5rank.load` and `t5rank serve`; the child processes find it through `T5RANK_MODELS=toy_overlap`.

Its score of a (query, passage) pair is `weight` times the number of distinct query words the
passage holds (case-folded), its probability the sigmoid of that score.
"""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.checkpoints import native
from t5rank.models import registry
from t5rank.models.config import JsonConfig
from t5rank.models.loading import refuse_options
from t5rank.models.reranker import Batch, Reranker


@dataclasses.dataclass(frozen=True)
class OverlapConfig(JsonConfig):
  """The toy's architecture: nothing but how many words of a query it reads."""
  MODEL: ClassVar[str] = "toy_overlap"
  max_query_words: int = 32


def overlap(query: str, passage: str, max_words: int) -> int:
  """How many distinct words of `query` (its first `max_words`) `passage` holds, case-folded."""
  words = set(re.findall(r"\w+", passage.lower()))
  return len(set(re.findall(r"\w+", query.lower())[:max_words]) & words)


@jax.jit
def score_step(params, counts):
  """(score, probability) of a batch of overlap counts (B,)."""
  score = params["weight"] * counts
  return score, jax.nn.sigmoid(score)


class OverlapReranker(Reranker):
  name = OverlapConfig.MODEL
  log_probability = False  # any real number, higher better

  def __init__(self, config: OverlapConfig):
    self.config = config

  def encode(self, queries, passages, first_stage=None):
    return [overlap(q, p, self.config.max_query_words) for q, p in zip(queries, passages)]

  def batches(self, examples, *, batch_tokens, row_multiple=1, length_bucket=None):
    rows = 1 << max(len(examples) - 1, 0).bit_length()  # powers of two: few shapes to compile
    rows = -(-rows // row_multiple) * row_multiple
    counts = np.zeros(rows, np.float32)
    counts[:len(examples)] = examples
    return [Batch(np.arange(len(examples)), (counts,))]

  def score_batch(self, params, arrays):
    return score_step(params, jnp.asarray(arrays[0]))

  def param_axes(self):
    return {"weight": None}

  def fingerprint(self):
    return {"model": self.name, "config": self.config.to_json()}

  @property
  def reads_first_stage(self):
    return False


def load_overlap(checkpoint, **options):
  """(OverlapReranker, parameters) of a toy checkpoint (`t5rank.checkpoints.native`)."""
  refuse_options(checkpoint, "toy_overlap", options, "the toy has no scoring options")
  config, params = native.restore_model(checkpoint.path, OverlapConfig, OverlapConfig.MODEL,
                                        checkpoint.metadata, checkpoint.digests)
  return OverlapReranker(config), params


registry.register(registry.Family(
    name=OverlapConfig.MODEL, config=OverlapConfig, reranker=OverlapReranker,
    loader=load_overlap, description="a toy: weight x query words in the passage"))
