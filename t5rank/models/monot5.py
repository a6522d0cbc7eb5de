"""The monoT5 score, defined once: log P(positive word) from the encoder and ONE decoder step.

    encoder(ids) -> decoder([0]) -> logits of the two target words only -> log-softmax over the two

`MonoT5` is the `t5rank.models.reranker.Reranker` around it: the input template and tokenization
(`t5rank.models.inputs`) and length buckets (`t5rank.models.batching`); `t5rank.checkpoints.models`
loads it from a checkpoint with the vocabulary, target words and input options its files name. Training-time
evaluation, the `t5rank score` command, the demo and the benchmarks all score through it.
Only the two rows of the output projection are computed, which gives the same numbers as slicing
the full-vocabulary logits (tests/test_score.py checks it to 1e-6).
"""

from __future__ import annotations

import functools
import json
from typing import Optional, Sequence

import jax
import jax.numpy as jnp

from t5rank.models import registry
from t5rank.models.batching import BUCKET_STEP, bucket_batches
from t5rank.models.config import T5Config
from t5rank.models.inputs import DEFAULT_MAX_LENGTH, ScoreIds, TemplateIds, assemble
from t5rank.models.network import T5, param_axes
from t5rank.models.reranker import Batch, Reranker
from t5rank.models.vocab import Vocabulary


def monot5_score(params, encoder_input_tokens: jax.Array, *, config: T5Config,
                 target_ids: tuple[int, int]) -> tuple[jax.Array, jax.Array]:
  """(log P(positive), P(positive)), each (B,), for padded encoder ids (B, L) (0 = padding).

  `target_ids` is (positive id, negative id); P is the softmax over those two logits only. A pure,
  jittable function of `params` and the ids.
  """
  model = T5(config)
  tokens = jnp.asarray(encoder_input_tokens)
  decoder_input = jnp.zeros((tokens.shape[0], 1), jnp.int32)  # the start id 0

  def two_logits(module: T5):
    encoded = module.encode(tokens)
    return module.decode(encoded, tokens, decoder_input, vocab_ids=jnp.asarray(target_ids))

  logits = model.apply({"params": params}, method=two_logits)[:, 0, :]  # (B, 2)
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  return log_probs[:, 0], jnp.exp(log_probs[:, 0])


@functools.partial(jax.jit, static_argnames=("config", "target_ids"))
def score_step(params, encoder_input_tokens: jax.Array, *, config: T5Config,
               target_ids: tuple[int, int]) -> tuple[jax.Array, jax.Array]:
  """`monot5_score` compiled; one compilation per (config, targets, input shape)."""
  return monot5_score(params, encoder_input_tokens, config=config, target_ids=target_ids)


class MonoT5(Reranker):
  """monoT5 as a `Reranker`: `Query: q Document: d Relevant:` (with `bm25_in_input`, `Query: q BM25:
  12 Document: d Relevant:`, `t5rank.data.bm25_input`) cut to `max_length` ids, scored by
  `score_step`: (log P(positive word), P(positive word))."""

  name = "monot5"

  def __init__(self, config: T5Config, vocab: Vocabulary, target_ids: tuple[int, int], *,
               max_length: int = DEFAULT_MAX_LENGTH, bm25_in_input: bool = False):
    if vocab.vocab_size > config.vocab_size:
      raise ValueError(f"vocabulary {vocab.path} has {vocab.vocab_size} ids but the model only "
                       f"{config.vocab_size} embedding rows; give the vocabulary it was trained "
                       "with (--vocab)")
    marks = TemplateIds(vocab)
    fixed = len(marks.query) + len(marks.document) + len(marks.relevant) + 1  # + EOS
    if max_length <= fixed:
      raise ValueError(f"max_length {max_length} cannot hold the input template and any text "
                       f"({fixed} tokens: Query: Document: Relevant: EOS)")
    self.config = config
    self.vocab = vocab
    self.target_ids = tuple(int(i) for i in target_ids)
    self.max_length = max_length
    self.bm25_in_input = bm25_in_input

  @property
  def reads_first_stage(self) -> bool:
    return self.bm25_in_input

  def encode(self, queries: Sequence[str], passages: Sequence[str],
             first_stage: Optional[Sequence[float]] = None) -> list[list[int]]:
    """Ids (with EOS, unpadded) of each pair's input, as `t5rank.models.inputs.encode_pairs` makes
    them, tokenizing each distinct query and passage once."""
    if len(queries) != len(passages):
      raise ValueError(f"{len(queries)} queries but {len(passages)} passages")
    if self.bm25_in_input and (first_stage is None or len(first_stage) != len(queries)):
      raise ValueError("this monoT5 reads each pair's BM25 score: give one score per pair")
    marks, score_ids = TemplateIds(self.vocab), ScoreIds(self.vocab)
    distinct_queries = list(dict.fromkeys(queries))
    query_ids = dict(zip(distinct_queries, self.vocab.encode_batch(distinct_queries)))
    distinct_passages = list(dict.fromkeys(passages))
    passage_ids = dict(zip(distinct_passages, self.vocab.encode_batch(distinct_passages)))
    return [assemble(query_ids[q], passage_ids[d], marks, self.max_length,
                     score_ids(first_stage[i]) if self.bm25_in_input else ())
            for i, (q, d) in enumerate(zip(queries, passages))]

  def batches(self, examples: Sequence[Sequence[int]], *, batch_tokens: int,
              row_multiple: int = 1, length_bucket: Optional[int] = None) -> list[Batch]:

    return bucket_batches(examples, batch_tokens=batch_tokens, max_length=self.max_length,
                          row_multiple=row_multiple, step=length_bucket or BUCKET_STEP)

  def score_batch(self, params, arrays):
    (tokens,) = arrays
    return score_step(params, tokens, config=self.config, target_ids=self.target_ids)

  def param_axes(self):
    return param_axes(self.config)

  def fingerprint(self) -> dict:
    return {"model": self.name, "config": json.loads(self.config.to_json()),
            "vocab": self.vocab.sha256, "targets": list(self.target_ids),
            "max_length": self.max_length, "bm25_in_input": self.bm25_in_input}

  def describe(self) -> str:
    return (f"monoT5 ({self.config.num_parameters / 1e6:.1f}M parameters, {self.config.dtype}, "
            f"targets {self.target_ids}, max_length {self.max_length}"
            f"{', BM25 score in the input' if self.bm25_in_input else ''})")

  @classmethod
  def for_evaluation(cls, config, *, vocab: Vocabulary, target_ids: tuple[int, int],
                     max_length: int, bm25_in_input: bool, **_) -> "MonoT5":
    """The reranker of `config` as training-time evaluation scores it (`RerankEval`'s options)."""
    return cls(config, vocab, target_ids, max_length=max_length, bm25_in_input=bm25_in_input)


registry.register(registry.Family(
    name=MonoT5.name, config=T5Config, reranker=MonoT5,
    trainable="t5rank.training.seq2seq.Seq2Seq", loader="t5rank.checkpoints.models.load_monot5",
    encoder="t5rank.retrieval.encoders.t5_mean_encoder",
    description="T5 scoring P(true) of `Query: q Document: d Relevant:` (Nogueira et al. 2020)"))
