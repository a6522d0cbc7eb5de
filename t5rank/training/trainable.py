"""What the trainer needs of a model: one `Trainable` per kind of model, picked by its config.

    t5rank.training.trainer.train(model_config=...)
      ─► trainable_for(model_config): the config's family in `t5rank.models.registry` names its
         Trainable (a T5Config ─► `seq2seq.Seq2Seq`, monoT5's token cross-entropy on the target
         word; a TKConfig ─► `pairwise.PairwiseTK`, TK's hinge loss on triples; a
         DualEncoderConfig ─► `dual.DualEncoder`, the in-batch sampled softmax; ...)
      ─► the trainer's one loop: init or restore, `loss_and_metrics` in a pure jitted step,
         checkpoints, metrics, evaluation, and `export` of the final model

A new model is a new `Trainable` (and a `Reranker` to score it, one registration): the loop, the
checkpoints, resume, the NaN guard, the metrics and the evaluation hooks are shared.
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

  @classmethod
  def from_config(cls, config, optimization) -> "Trainable":
    """This model's Trainable of `config` for a run with `optimization` (a model that has dropout
    takes `optimization.dropout_rate`; one without refuses a rate above 0)."""
    if optimization.dropout_rate:
      raise ValueError(f"{type(config).__name__} models train without dropout, but the run sets "
                       f"dropout_rate {optimization.dropout_rate}; set DROPOUT_RATE = 0.0")
    return cls(config)

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


def trainable_for(config, optimization, model: Optional[str] = None) -> Trainable:
  """The `Trainable` of a model config: the family's named `model`, else that of the config's
  class (`t5rank.models.registry.for_config`), made for a run with `optimization`
  (`Trainable.from_config`)."""
  from t5rank.models import registry

  return registry.for_config(config, model).part("trainable").from_config(config, optimization)
