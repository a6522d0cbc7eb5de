"""The encoder-only classifier: the "monoBERT" formulation (Nogueira and Cho 2019) on T5's encoder.

    "Query: q Document: d Relevant:" -> T5 encoder -> the first position's output h (d_model)
      -> logits = h W + b (2 classes: not relevant, relevant) -> cross-entropy on the label;
    score = log P(relevant) = log_softmax(logits)[1]

The monoT5 paper's Table 3 baseline: the same pre-trained encoder as monoT5, the same input, but a
classification head in place of the decoder and its target words. BERT's head reads the [CLS]
token; T5 has none, so the head reads the first input position (the piece of "Query"), which the
bidirectional encoder lets attend to the whole input. The head is initialized at random (normal,
std d_model^-1/2, bias 0); the encoder and the shared embedding come from a T5 checkpoint (any
format t5rank reads) or a classifier checkpoint. Parameters: {"t5": {"token_embedder", "encoder"},
"head": {"kernel" (d_model, 2), "bias" (2,)}}; T5's decoder is not kept.

`Classifier` is its `Reranker` (`t5rank score` reads a checkpoint whose metadata says
`model: classifier`): monoT5's input, tokenization and batches, this score.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import ClassVar, Optional

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.checkpoints.resolved import Checkpoint
from t5rank.models import registry
from t5rank.models.config import JsonConfig, T5Config
from t5rank.models.monot5 import MonoT5
from t5rank.models.network import T5, init_params as t5_init, param_axes as t5_axes
from t5rank.models.vocab import Vocabulary

MODEL_NAME = "classifier"
ENCODER_KEYS = ("token_embedder", "encoder")  # the parts of T5's parameters the classifier keeps
NUM_CLASSES = 2  # 0 = not relevant, 1 = relevant


@dataclasses.dataclass(frozen=True)
class EncoderHeadConfig(JsonConfig):
  """A head on the encoder of the T5 architecture `t5` (its decoder fields unused): what the
  classifier and RankT5 Encoder-only (`t5rank.models.rankt5_encoder`) share. A subclass sets MODEL
  and `init_params(rng)`, its random parameters."""
  t5: T5Config

  def __post_init__(self):
    if isinstance(self.t5, dict):  # from JSON
      object.__setattr__(self, "t5", T5Config(**self.t5))

  @property
  def vocab_size(self) -> int:
    return self.t5.vocab_size

  @property
  def dtype(self) -> str:
    return self.t5.dtype

  def init_params(self, rng: jax.Array) -> dict:
    raise NotImplementedError

  @property
  def num_parameters(self) -> int:
    shapes = jax.eval_shape(lambda: self.init_params(jax.random.PRNGKey(0)))
    return int(sum(np.prod(s.shape) for s in jax.tree.leaves(shapes)))


@dataclasses.dataclass(frozen=True)
class ClassifierConfig(EncoderHeadConfig):
  """The classifier on the encoder of the T5 architecture `t5` (its decoder fields unused)."""
  MODEL: ClassVar[str] = "classifier"

  def init_params(self, rng: jax.Array) -> dict:
    return init_params(self, rng)


def encoder_params(t5_params) -> dict:
  """T5's parameters without the decoder: what the classifier keeps of a T5 checkpoint."""
  return {k: t5_params[k] for k in ENCODER_KEYS}


def init_head(rng: jax.Array, d_model: int) -> dict:
  return {"kernel": jax.random.normal(rng, (d_model, NUM_CLASSES), jnp.float32) * d_model ** -0.5,
          "bias": jnp.zeros((NUM_CLASSES,), jnp.float32)}


def init_params(config: ClassifierConfig, rng: jax.Array) -> dict:
  """Random parameters (encoder as T5 initializes it, the head as above)."""

  encoder_rng, head_rng = jax.random.split(rng)
  return {"t5": encoder_params(t5_init(config.t5, encoder_rng)),
          "head": init_head(head_rng, config.t5.d_model)}


def param_axes(config: ClassifierConfig) -> dict:
  """Logical axes: T5's for the encoder, the head's kernel split as an embedding, bias replicated."""
  from jax.sharding import PartitionSpec


  return {"t5": encoder_params(t5_axes(config.t5)),
          "head": {"kernel": PartitionSpec("embed", None), "bias": PartitionSpec(None)}}


def classifier_logits(params, encoder_input_tokens: jax.Array, *, config: T5Config,
                      dropout_rng: Optional[jax.Array] = None) -> jax.Array:
  """(B, 2) float32 logits (not relevant, relevant) of padded ids (B, L); dropout when
  `dropout_rng` is given."""

  encoded = T5(config).apply(
      {"params": params["t5"]}, jnp.asarray(encoder_input_tokens), method=T5.encode,
      deterministic=dropout_rng is None,
      rngs=None if dropout_rng is None else {"dropout": dropout_rng})  # (B, L, D)
  first = encoded[:, 0, :].astype(jnp.float32)
  return first @ params["head"]["kernel"] + params["head"]["bias"]


def classifier_score(params, encoder_input_tokens: jax.Array, *,
                     config: T5Config) -> tuple[jax.Array, jax.Array]:
  """(log P(relevant), P(relevant)), each (B,)."""
  log_probs = jax.nn.log_softmax(classifier_logits(params, encoder_input_tokens, config=config))
  return log_probs[:, 1], jnp.exp(log_probs[:, 1])


@functools.partial(jax.jit, static_argnames=("config",))
def score_step(params, encoder_input_tokens: jax.Array, *, config: T5Config):
  return classifier_score(params, encoder_input_tokens, config=config)


class Classifier(MonoT5):
  """The classifier as a `Reranker`: monoT5's input (`Query: q Document: d Relevant:`, or with the
  BM25 score), tokenization and length buckets; scored by `score_step`."""

  name = MODEL_NAME

  def __init__(self, config: ClassifierConfig, vocab: Vocabulary, *, max_length: int = 512,
               bm25_in_input: bool = False, truncation: str = "document"):
    super().__init__(config.t5, vocab, (), max_length=max_length, bm25_in_input=bm25_in_input,
                     truncation=truncation)
    self.classifier_config = config

  def score_batch(self, params, arrays):
    (tokens,) = arrays
    return score_step(params, tokens, config=self.config)

  def param_axes(self):
    return param_axes(self.classifier_config)

  def fingerprint(self) -> dict:
    return {"model": self.name, "config": json.loads(self.classifier_config.to_json()),
            "vocab": self.vocab.sha256, "max_length": self.max_length,
            "bm25_in_input": self.bm25_in_input, **self.truncation_fingerprint()}

  def describe(self) -> str:
    return (f"encoder-only classifier ({self.classifier_config.num_parameters / 1e6:.1f}M "
            f"parameters, {self.config.dtype}, max_length {self.max_length}"
            f"{', BM25 score in the input' if self.bm25_in_input else ''})")

  @classmethod
  def for_evaluation(cls, config: ClassifierConfig, *, vocab: Vocabulary, max_length: int,
                     bm25_in_input: bool, **_) -> "Classifier":
    """The classifier as training-time evaluation scores it (target words do not apply)."""
    return cls(config, vocab, max_length=max_length, bm25_in_input=bm25_in_input)


def load_classifier(checkpoint: Checkpoint, *, config_name: Optional[str] = None,
                    vocab: Optional[str] = None, dtype: Optional[str] = None,
                    max_length: Optional[int] = None, bm25_in_input: Optional[bool] = None,
                    targets=None, truncation: str = "document"):
  """(Classifier, parameters) of a classifier checkpoint, with the vocabulary, input length and
  BM25 flag its metadata names unless given. Target words do not apply (refused if given)."""
  from t5rank.checkpoints import native
  from t5rank.models.reranker import cast_params
  from t5rank.models.vocab import load_vocabulary

  if config_name is not None:
    raise ValueError(f"{checkpoint.path} is a t5rank classifier checkpoint with its own "
                     "config.json; --config is for checkpoints without one")
  if targets is not None:
    raise ValueError(f"{checkpoint.path} is an encoder-only classifier: it has no target words "
                     "(--targets is for monoT5)")
  config, params = native.restore_model(checkpoint.path, ClassifierConfig, MODEL_NAME,
                                        checkpoint.metadata, checkpoint.digests)
  if dtype:
    config = config.replace(t5=config.t5.replace(dtype=dtype))
    params = cast_params(params, dtype)
  vocabulary = (load_vocabulary(vocab) if vocab is not None
                else load_vocabulary(checkpoint.vocabulary, checkpoint.vocabulary_extra_ids))
  try:
    reranker = Classifier(config, vocabulary, max_length=max_length or checkpoint.max_length or 512,
                          bm25_in_input=bool(checkpoint.bm25_in_input) if bm25_in_input is None
                          else bm25_in_input, truncation=truncation)
  except ValueError as e:
    raise ValueError(f"{checkpoint.path}: {e}") from None
  return reranker, params


registry.register(registry.Family(
    name=MODEL_NAME, config=ClassifierConfig, reranker=Classifier,
    trainable="t5rank.training.classifier.ClassifierTrainable",
    loader=load_classifier,
    description="T5's encoder with a two-way head on monoT5's input (the paper's Table 3 baseline)"))
