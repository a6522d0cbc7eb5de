"""Training the encoder-only classifier (`t5rank.models.classifier`): a `Trainable` for the trainer.

    monoT5 task rows (the same SeqIO tasks, inputs and batches as monoT5's; the target word says the
    label: the task's positive word = relevant)
      -> T5 encoder -> first position -> 2-way head -> cross-entropy on the label
      -> metrics: loss, accuracy

Everything but the loss and the parameters is monoT5's (`seq2seq.Seq2Seq`): the vocabulary checks
(the task's against the model's and the init checkpoint's), the export with the task's vocabulary
and BM25 flag. Rows are never packed: the head reads each row's first position.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.checkpoints import native
from t5rank.data.seqio_tasks import task_target_words, task_vocabulary
from t5rank.data.training_data import training_dataset
from t5rank.models import classifier
from t5rank.models.t5_weights import load_checkpoint
from t5rank.models.vocab import resolve_target_words
from t5rank.training.seq2seq import Seq2Seq
from t5rank.training.trainable import DatasetFn


class ClassifierTrainable(Seq2Seq):
  """The classifier's training on a monoT5 task. `Init.checkpoint`: a T5 checkpoint (any format;
  its encoder and embedding are kept, the head is random), a classifier checkpoint, or None."""

  model_name = classifier.MODEL_NAME

  @classmethod
  def from_config(cls, config, optimization) -> "ClassifierTrainable":
    """Its encoder's dropout replaced by the run's `dropout_rate`."""
    return cls(config.replace(t5=config.t5.replace(dropout_rate=optimization.dropout_rate)))

  def __init__(self, config: classifier.ClassifierConfig):
    self.config = config
    self.z_loss = 0.0

  def check(self, task_name: str, init, optimization, loop) -> None:

    if task_target_words(task_name) is None:
      raise ValueError(f"the classifier trains on monoT5 tasks (relevant / not relevant pairs); "
                       f"{task_name} is not one")
    if init.term_matching_heads:
      raise ValueError("term_matching_heads is for monoT5 from random weights; the classifier "
                       "does not take it")
    super().check(task_name, init, optimization, loop)

  def init_params(self, rng: jax.Array, init) -> Any:

    if init.checkpoint is None:
      return classifier.init_params(self.config, rng)
    if native.is_native_checkpoint(init.checkpoint) and (
        native.read_metadata(init.checkpoint).get("model") == classifier.MODEL_NAME):
      config, params = native.restore_model(init.checkpoint, classifier.ClassifierConfig,
                                             classifier.MODEL_NAME)
      if config.t5.replace(dropout_rate=self.config.t5.dropout_rate) != self.config.t5:
        raise ValueError(f"{init.checkpoint} is a classifier of another architecture")
      return params
    t5_params = load_checkpoint(init.checkpoint, config=self.config.t5)[1]
    return {"t5": classifier.encoder_params(t5_params),
            "head": classifier.init_head(jax.random.fold_in(rng, 2), self.config.t5.d_model)}

  def param_axes(self) -> Any:
    return classifier.param_axes(self.config)

  def loss_and_metrics(self, params, batch, dropout_rng):
    logits = classifier.classifier_logits(params, batch["encoder_input_tokens"],
                                          config=self.config.t5, dropout_rng=dropout_rng)
    labels = batch["labels"].astype(jnp.int32)
    log_probs = jax.nn.log_softmax(logits)
    loss = -jnp.mean(jnp.take_along_axis(log_probs, labels[:, None], axis=1))
    accuracy = jnp.mean((jnp.argmax(logits, axis=-1) == labels).astype(jnp.float32))
    return loss, {"loss": loss, "accuracy": accuracy}

  def dataset_fn(self) -> DatasetFn:
    import t5rank.tasks  # noqa: F401  (registers the tasks)

    def labelled(task_name: str, *, pack: bool = False, **kwargs):
      if pack:
        raise ValueError("the classifier reads each row's first position: train it unpacked "
                         "(PACK = False)")
      positive, _ = resolve_target_words(task_vocabulary(task_name), task_target_words(task_name))
      return (dict(batch, labels=(batch["decoder_target_tokens"][:, 0] == positive).astype(np.int32))
              for batch in training_dataset(task_name, pack=False, **kwargs))

    return labelled

  def export_metadata(self, metadata: dict) -> dict:
    metadata = super().export_metadata(metadata)
    metadata.pop("target_words", None)
    return dict(metadata, model=classifier.MODEL_NAME)

  def same_config(self, saved_json: str) -> bool:
    return classifier.ClassifierConfig.from_json(saved_json) == self.config
