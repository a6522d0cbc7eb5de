"""RankT5 Encoder-only: T5's encoder, its first position through a dense layer to one score
(Zhuang et al., SIGIR 2023, "RankT5: Fine-Tuning T5 for Text Ranking with Ranking Losses",
section 3.2, the "Enc" structure).

    "Query: q Document: d" (RankT5's input, `t5rank.models.rankt5`) -> T5 encoder
      -> the first position's output h (d_model)  (the paper's (3): Pool_first)
      -> s = h w + b, w (d_model, 1)               (the paper's (3): Dense)

The decoder is not kept. The head is initialized at random (normal, std d_model^-1/2, bias 0), the
encoder and shared embedding from a T5 checkpoint; trained with the ranking losses of
`t5rank.training.ranking_losses` (`t5rank.training.listwise`). Google published only Encoder-Decoder
checkpoints, so this family's checkpoints are t5rank's own (metadata `model: rankt5_encoder`).
Parameters: {"t5": {"token_embedder", "encoder"}, "head": {"kernel" (d_model, 1), "bias" (1,)}},
the encoder-only classifier's layout (`t5rank.models.classifier`) with one output instead of two.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, ClassVar, Optional

import jax
import jax.numpy as jnp

from t5rank.checkpoints.resolved import Checkpoint
from t5rank.models import classifier, registry
from t5rank.models.config import T5Config
from t5rank.models.network import init_params as t5_init
from t5rank.models.rankt5 import (RankT5, RankT5Marks, rankt5_input, reads_bm25,
                                  refuse_monot5_options)
from t5rank.models.vocab import Vocabulary

MODEL_NAME = "rankt5_encoder"


@dataclasses.dataclass(frozen=True)
class RankT5EncoderConfig(classifier.EncoderHeadConfig):
  """RankT5 Encoder-only on the encoder of the T5 architecture `t5` (its decoder fields unused)."""
  MODEL: ClassVar[str] = MODEL_NAME

  def init_params(self, rng: jax.Array) -> dict:
    return init_params(self, rng)


def init_head(rng: jax.Array, d_model: int) -> dict:
  return {"kernel": jax.random.normal(rng, (d_model, 1), jnp.float32) * d_model ** -0.5,
          "bias": jnp.zeros((1,), jnp.float32)}


def init_params(config: RankT5EncoderConfig, rng: jax.Array) -> dict:
  """Random parameters: the encoder as T5 initializes it, the head as above."""
  encoder_rng, head_rng = jax.random.split(rng)
  return {"t5": classifier.encoder_params(t5_init(config.t5, encoder_rng)),
          "head": init_head(head_rng, config.t5.d_model)}


def param_axes(config: RankT5EncoderConfig) -> dict:
  """The classifier's axes (the head's kernel split as an embedding, its bias replicated)."""
  return classifier.param_axes(config)


def rankt5_encoder_score(params, encoder_input_tokens: jax.Array, *, config: T5Config,
                         dropout_rng: Optional[jax.Array] = None) -> jax.Array:
  """(B,) float32 scores of padded ids (B, L): Dense(first encoder position), the paper's (3)
  (`classifier.classifier_logits` with a (d_model, 1) head). Dropout when `dropout_rng` is given."""
  return classifier.classifier_logits(params, encoder_input_tokens, config=config,
                                      dropout_rng=dropout_rng)[:, 0]


@functools.partial(jax.jit, static_argnames=("config",))
def score_step(params, encoder_input_tokens: jax.Array, *, config: T5Config):
  """(score, sigmoid(score)), each (B,)."""
  scores = rankt5_encoder_score(params, encoder_input_tokens, config=config)
  return scores, jax.nn.sigmoid(scores)


class RankT5Encoder(RankT5):
  """RankT5 Encoder-only as a `Reranker`: RankT5's input, tokenization and batches; this score."""

  name = MODEL_NAME

  def __init__(self, config: RankT5EncoderConfig, vocab: Vocabulary, *, max_length: int = 512,
               bm25_in_input: bool = False):
    if vocab.vocab_size > config.t5.vocab_size:
      raise ValueError(f"vocabulary {vocab.path} has {vocab.vocab_size} ids but the model only "
                       f"{config.t5.vocab_size} embedding rows")
    rankt5_input([], [], RankT5Marks(vocab), max_length)  # refuses a max_length too short
    self.encoder_config = config
    self.config = config.t5
    self.vocab = vocab
    self.max_length = max_length
    self.bm25_in_input = bm25_in_input

  def score_batch(self, params, arrays):
    (tokens,) = arrays
    return score_step(params, tokens, config=self.config)

  def param_axes(self):
    return param_axes(self.encoder_config)

  def fingerprint(self) -> dict:
    return {"model": self.name, "config": json.loads(self.encoder_config.to_json()),
            "vocab": self.vocab.sha256, "max_length": self.max_length,
            **({"bm25_in_input": True} if self.bm25_in_input else {})}

  def describe(self) -> str:
    return (f"RankT5 encoder-only ({self.encoder_config.num_parameters / 1e6:.1f}M parameters, "
            f"{self.config.dtype}, max_length {self.max_length}"
            f"{', BM25 score in the input' if self.bm25_in_input else ''})")

  @classmethod
  def for_evaluation(cls, config: RankT5EncoderConfig, *, vocab: Vocabulary, max_length: int,
                     bm25_in_input: bool = False, **_) -> "RankT5Encoder":
    return cls(config, vocab, max_length=max_length, bm25_in_input=bm25_in_input)


def load_rankt5_encoder(checkpoint: Checkpoint, *, config_name: Optional[str] = None,
                        vocab: Optional[str] = None, dtype: Optional[str] = None,
                        max_length: Optional[int] = None, targets=None,
                        bm25_in_input: Optional[bool] = None,
                        truncation: Optional[str] = None) -> tuple[RankT5Encoder, Any]:
  """(RankT5Encoder, parameters) of a t5rank checkpoint of this family, with the vocabulary and
  input length its metadata names unless given (T5's vocabulary and 512 when it names none)."""
  from t5rank.checkpoints import native
  from t5rank.models.reranker import cast_params
  from t5rank.models.vocab import load_vocabulary

  if config_name is not None:
    raise ValueError(f"{checkpoint.path} is a t5rank {MODEL_NAME} checkpoint with its own "
                     "config.json; --config is for checkpoints without one")
  refuse_monot5_options(checkpoint, MODEL_NAME, targets, truncation)
  config, params = native.restore_model(checkpoint.path, RankT5EncoderConfig, MODEL_NAME,
                                        checkpoint.metadata, checkpoint.digests)
  if dtype:
    config = config.replace(t5=config.t5.replace(dtype=dtype))
    params = cast_params(params, dtype)
  if vocab is not None:
    vocabulary = load_vocabulary(vocab)
  elif checkpoint.vocabulary is not None:
    vocabulary = load_vocabulary(checkpoint.vocabulary, checkpoint.vocabulary_extra_ids)
  else:  # a checkpoint that names none was trained with T5's
    vocabulary = load_vocabulary()
  try:
    reranker = RankT5Encoder(config, vocabulary, max_length=max_length or checkpoint.max_length
                             or 512, bm25_in_input=reads_bm25(checkpoint, bm25_in_input))
  except ValueError as e:
    raise ValueError(f"{checkpoint.path}: {e}") from None
  return reranker, params


registry.register(registry.Family(
    name=MODEL_NAME, config=RankT5EncoderConfig, reranker=RankT5Encoder,
    loader=load_rankt5_encoder, trainable="t5rank.training.listwise.RankT5EncoderListwise",
    description="T5's encoder, first position -> dense -> one score, trained with ranking losses "
                "(Zhuang et al. 2023)"))
