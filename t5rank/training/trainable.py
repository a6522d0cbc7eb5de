"""What the trainer needs of a model: one `Trainable` per kind of model, picked by its config.

    t5rank.training.trainer.train(model_config=...)
      ─► trainable_for(model_config): a T5Config ─► `seq2seq.Seq2Seq` (monoT5: token cross-entropy
         on the target word), a TKConfig ─► `pairwise.PairwiseTK` (TK: hinge loss on triples),
         a DualEncoderConfig ─► `dual.DualEncoder` (in-batch sampled softmax on question → answer)
      ─► the trainer's one loop: init or restore, `loss_and_metrics` in a pure jitted step,
         checkpoints, metrics, evaluation, and `export` of the final model

A new model is a new `Trainable` (and a `Reranker` to score it): the loop, the checkpoints, resume,
the NaN guard, the metrics and the evaluation hooks are shared.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Iterator, Mapping, Optional

import jax
import numpy as np

DatasetFn = Callable[..., Iterator[dict[str, np.ndarray]]]


class Trainable(abc.ABC):
  """A model the trainer can train: its config (architecture, JSON round-trip), parameters,
  logical axes, loss, data and export. Subclasses hold `config`."""

  config: Any

  @abc.abstractmethod
  def check(self, task_name: str, init, optimization, loop) -> None:
    """Raises ValueError before anything is trained when the task, the init, the optimization or
    the loop's evaluation does not fit this model."""

  @abc.abstractmethod
  def init_params(self, rng: jax.Array, init) -> Any:
    """Fresh parameters (host or device arrays): random from `rng`, or from `init.checkpoint`."""

  @abc.abstractmethod
  def param_axes(self) -> Any:
    """Logical axes of every parameter (`t5rank.partitioning` places them by the rules)."""

  @abc.abstractmethod
  def loss_and_metrics(self, params, batch: Mapping[str, Any], dropout_rng: Optional[jax.Array]
                       ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(loss, metrics) of one batch; metrics hold at least `loss` and `accuracy`. Pure."""

  @abc.abstractmethod
  def batch_counts(self, batch: Mapping[str, np.ndarray]) -> tuple[int, int]:
    """(examples, non-padding tokens) of a host batch, for examples/s and tokens/s."""

  @abc.abstractmethod
  def dataset_fn(self) -> DatasetFn:
    """The default `dataset_fn` of `train` for this model (see `train`'s docstring)."""

  @abc.abstractmethod
  def export(self, directory: str, params, metadata: dict) -> None:
    """Writes the trained `params` as a checkpoint `t5rank score` reads, with `metadata` and
    whatever the model needs to score (its vocabulary files)."""

  def same_config(self, saved_json: str) -> bool:
    """Whether a checkpoint's saved config JSON is this model's architecture (resume check)."""
    return type(self.config).from_json(saved_json) == self.config


def query_document_lengths(model: str, config, feature_lengths: Mapping[str, int],
                           pack: bool) -> dict[str, int]:
  """The {query, document} lengths of a model that trains on unpacked (query, document...) rows
  (TK, the dual encoder): its config's, which `feature_lengths` must repeat."""
  if pack:
    raise ValueError(f"{model} batches hold queries and documents of their own lengths; PACK must "
                     "be False")
  wanted = {"query": config.max_query_length, "document": config.max_document_length}
  if dict(feature_lengths) != wanted:
    raise ValueError(f"{model}'s feature lengths are its config's {wanted}, got "
                     f"{dict(feature_lengths)}")
  return wanted


def trainable_for(config, optimization) -> Trainable:
  """The `Trainable` of a model config: `Seq2Seq` for a `T5Config` (its dropout replaced by
  `optimization.dropout_rate`, the z-loss `optimization.z_loss`), `ClassifierTrainable` for a
  `ClassifierConfig` (T5's encoder with a 2-way head; the same dropout), `PairwiseTK` for a `TKConfig`
  (which has no dropout), `dual.DualEncoder` for a `DualEncoderConfig` (`dual.T5DualEncoder` for its T5 variant)."""
  dropout_rate = optimization.dropout_rate
  from t5rank.models.config import T5Config
  from t5rank.models.dual_encoder import DualEncoderConfig, T5DualEncoderConfig
  from t5rank.models.tk import TKConfig

  if isinstance(config, T5Config):
    from t5rank.training.seq2seq import Seq2Seq
    return Seq2Seq(config.replace(dropout_rate=dropout_rate), z_loss=optimization.z_loss)
  from t5rank.models.classifier import ClassifierConfig
  if isinstance(config, ClassifierConfig):
    from t5rank.training.classifier import ClassifierTrainable
    return ClassifierTrainable(config.replace(t5=config.t5.replace(dropout_rate=dropout_rate)))
  if isinstance(config, DualEncoderConfig):
    from t5rank.training.dual import DualEncoder
    return DualEncoder(config)  # refuses dropout in check()
  if isinstance(config, T5DualEncoderConfig):
    from t5rank.training.dual import T5DualEncoder
    return T5DualEncoder(config)
  if isinstance(config, TKConfig):
    from t5rank.training.pairwise import PairwiseTK
    if dropout_rate:
      raise ValueError(f"TK trains without dropout (the paper's setting; TKConfig has none), but "
                       f"the run sets dropout_rate {dropout_rate}; set DROPOUT_RATE = 0.0")
    return PairwiseTK(config)
  raise TypeError("the trainer knows T5Config, ClassifierConfig, TKConfig and DualEncoderConfig "
                  "models, got "
                  f"{type(config).__name__}")
