"""T5 training (monoT5 fine-tuning, span-corruption pre-training): token cross-entropy, a `Trainable`.

    SeqIO task rows (encoder inputs, decoder targets, optionally packed): monoT5's "true"/"false" +
    EOS, or span corruption's sentinels and noise spans
      -> T5 forward with dropout -> token cross-entropy (+ z-loss) over the target tokens
      -> metrics: loss, accuracy of the first target token (monoT5: the target word), accuracy over
         all target tokens
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import jax
import jax.numpy as jnp

from t5rank.checkpoints.resolved import resolve
from t5rank.data.training_data import seq2seq_dataset
from t5rank.models.config import T5Config
from t5rank.models.network import T5, init_params, param_axes, term_matching_init
from t5rank.models.t5_weights import load_checkpoint, save_checkpoint
from t5rank.models.vocab import Vocabulary
from t5rank.training.trainable import DatasetFn, Trainable


def _tasks():
  """`t5rank.data.seqio_tasks`, imported where a task is read: the step, its loss and the export
  need no SeqIO, so a machine without TensorFlow can run them (`benchmarks/device_speed.py
  --train` on a GPU)."""
  from t5rank.data import seqio_tasks
  return seqio_tasks


Batch = Mapping[str, Any]
MODEL_INPUTS = ("encoder_input_tokens", "decoder_input_tokens", "decoder_target_tokens",
                "encoder_segment_ids", "decoder_segment_ids", "encoder_positions",
                "decoder_positions")


def cross_entropy(logits: jax.Array, targets: jax.Array,
                  z_loss: float = 0.0) -> jax.Array:
  """Per-token loss (B, T): -log softmax(logits)[target] + z_loss * log(Z)^2, in float32."""
  logits = logits.astype(jnp.float32)  # (B, T, V)
  log_z = jax.nn.logsumexp(logits, axis=-1)  # (B, T)
  target_logit = jnp.take_along_axis(logits, targets[..., None].astype(jnp.int32), axis=-1)[..., 0]
  return log_z - target_logit + z_loss * jnp.square(log_z)


def loss_and_metrics(params, batch: Batch, *, config: T5Config, dropout_rng: Optional[jax.Array],
                     z_loss: float = 0.0) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Mean token loss over `decoder_loss_weights`, the accuracy of the first target token (the
  target word) of every example and the accuracy over all target tokens. Packed rows (segment ids and positions given) give the same values
  as the same examples unpacked. Dropout is on when `dropout_rng` is given."""
  inputs = {k: batch[k] for k in MODEL_INPUTS if k in batch}
  logits = T5(config).apply({"params": params}, **inputs, deterministic=dropout_rng is None,
                            rngs=None if dropout_rng is None else {"dropout": dropout_rng})
  targets = batch["decoder_target_tokens"]  # (B, T)
  weights = batch["decoder_loss_weights"].astype(jnp.float32)  # (B, T)
  loss = jnp.sum(cross_entropy(logits, targets, z_loss) * weights) / jnp.maximum(weights.sum(), 1.0)
  positions = batch.get("decoder_positions")
  if positions is None:
    positions = jnp.broadcast_to(jnp.arange(targets.shape[1]), targets.shape)
  first = ((positions == 0) & (weights > 0)).astype(jnp.float32)  # (B, T) the target word of each
  correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)
  accuracy = jnp.sum(correct * first) / jnp.maximum(first.sum(), 1.0)
  token_accuracy = jnp.sum(correct * weights) / jnp.maximum(weights.sum(), 1.0)
  return loss, {"loss": loss, "accuracy": accuracy, "token_accuracy": token_accuracy}


def batch_counts(batch: Batch) -> tuple[int, int]:
  """(examples, non-padding tokens) of a numpy batch; a packed row holds several examples."""
  weights = batch["decoder_loss_weights"] > 0
  positions = batch.get("decoder_positions")
  if positions is None:
    examples = int(weights.any(axis=1).sum())
  else:
    examples = int(((positions == 0) & weights).sum())
  tokens = int((batch["encoder_input_tokens"] > 0).sum() + (batch["decoder_target_tokens"] > 0).sum())
  return examples, tokens


def check_vocabulary(vocab: Vocabulary, config: T5Config, task_name: str) -> None:
  """Raises ValueError when the task's vocabulary has more ids than the model has embedding rows."""
  if vocab.vocab_size > config.vocab_size:
    raise ValueError(
        f"task {task_name} tokenizes with {vocab.path}: {vocab.base_vocab_size} pieces + "
        f"{vocab.extra_ids} extra ids = {vocab.vocab_size} ids, more than the model's vocab_size "
        f"{config.vocab_size}; set it to at least {vocab.vocab_size} (gin: "
        f"config.get_config.vocab_size = {vocab.vocab_size})")


def check_init_vocabulary(checkpoint: str, vocab: Vocabulary, task_name: str) -> None:
  """Raises ValueError when the init checkpoint names a vocabulary (a t5rank checkpoint's shipped
  file, a Hugging Face directory's spiece.model) whose pieces differ from the task's: the ids would
  mean other words. Extra ids may differ (a model pre-trained with sentinels fine-tunes on a task
  without them). A checkpoint that names none (t5x, Mesh TensorFlow) gets a warning."""
  import logging


  stored = resolve(checkpoint).vocabulary
  if stored is None:
    logging.getLogger(__name__).warning(
        "init checkpoint %s names no vocabulary; task %s tokenizes with %s: make sure the model was "
        "trained with it", checkpoint, task_name, vocab.path)
    return
  theirs = Vocabulary(stored, 0)
  if theirs.sha256 != vocab.sha256:
    raise ValueError(
        f"vocabulary mismatch: init checkpoint {checkpoint} was trained with {stored} "
        f"({theirs.base_vocab_size} pieces, sha256 {theirs.sha256[:12]}), task {task_name} "
        f"tokenizes with {vocab.path} ({vocab.base_vocab_size} pieces, sha256 {vocab.sha256[:12]}); "
        "fine-tune on a task with the checkpoint's vocabulary")


def init_t5_params(config: T5Config, rng: jax.Array, init) -> Any:
  """A T5 network's first parameters: `init.checkpoint`'s, or random ones (with the term-matching
  heads when `init.term_matching_heads`: `t5rank.models.network.term_matching_init`)."""
  if init.checkpoint is not None:
    return load_checkpoint(init.checkpoint, config=config)[1]
  params = init_params(config, rng)
  if init.term_matching_heads:
    params = term_matching_init(params, config, jax.random.fold_in(rng, 1),
                                num_heads=init.term_matching_heads,
                                scale=init.term_matching_scale)
  return params


class Seq2Seq(Trainable):
  """T5's training on a SeqIO task: monoT5 (targets = the relevance word) or any other
  text-to-text task such as span-corruption pre-training."""

  @classmethod
  def from_config(cls, config: T5Config, optimization) -> "Seq2Seq":
    """Its dropout replaced by the run's `dropout_rate`, the z-loss the run's."""
    return cls(config.replace(dropout_rate=optimization.dropout_rate), z_loss=optimization.z_loss)

  def __init__(self, config: T5Config, z_loss: float = 0.0):
    self.config = config
    self.z_loss = z_loss

  def check(self, task_name: str, init, optimization, loop) -> None:

    del optimization
    tasks = _tasks()
    vocab = tasks.task_vocabulary(task_name)
    if vocab is not None:
      check_vocabulary(vocab, self.config, task_name)
      if init.checkpoint is not None:
        check_init_vocabulary(init.checkpoint, vocab, task_name)
      if hasattr(loop.eval_fn, "check_task"):
        loop.eval_fn.check_task(task_name, vocab, tasks.task_target_words(task_name),
                                tasks.task_bm25_in_input(task_name))
    if init.term_matching_heads and init.checkpoint is not None:
      raise ValueError("term_matching_heads initializes random weights; it cannot be combined "
                       f"with an init checkpoint {init.checkpoint!r} (set one of them)")

  def init_params(self, rng: jax.Array, init) -> Any:
    return init_t5_params(self.config, rng, init)

  def param_axes(self) -> Any:
    return param_axes(self.config)

  def loss_and_metrics(self, params, batch, dropout_rng):
    return loss_and_metrics(params, batch, config=self.config, dropout_rng=dropout_rng,
                            z_loss=self.z_loss)

  def batch_counts(self, batch) -> tuple[int, int]:
    return batch_counts(batch)

  def dataset_fn(self) -> DatasetFn:
    import t5rank.tasks  # noqa: F401  (registers the tasks)
    return seq2seq_dataset

  def export_metadata(self, metadata: dict) -> dict:
    """The final checkpoint's metadata: the run's plus the task's (`metadata["task_name"]`) target
    words (`t5rank score` uses the same words), BM25-input flag (it writes the candidates' BM25
    scores into the inputs the same way) and model, when it is not monoT5 (duoT5's pairs)."""

    task_name, tasks = metadata["task_name"], _tasks()
    if tasks.task_model(task_name) != "monot5":
      metadata = dict(metadata, model=tasks.task_model(task_name))
    targets = tasks.task_target_words(task_name)
    if targets is not None:
      metadata = dict(metadata, target_words=targets)
    if tasks.task_bm25_in_input(task_name):
      metadata = dict(metadata, bm25_in_input=True)
    return metadata

  def export(self, directory: str, params, metadata: dict) -> None:
    """A t5rank checkpoint with `export_metadata` and the task's vocabulary file (copied in before
    config.json marks the checkpoint complete; metadata.json names it as `vocabulary`, relative to
    the checkpoint, and `vocabulary_extra_ids`), so that `t5rank score` tokenizes and scores as the
    training did."""
    import os
    import shutil


    vocab = _tasks().task_vocabulary(metadata["task_name"])
    metadata = self.export_metadata(metadata)
    if vocab is not None:
      name = os.path.basename(vocab.path)
      metadata = dict(metadata, vocabulary=name, vocabulary_extra_ids=vocab.extra_ids)
      if jax.process_index() == 0:
        os.makedirs(directory, exist_ok=True)
        shutil.copyfile(vocab.path, os.path.join(directory, name + ".tmp"))
        os.replace(os.path.join(directory, name + ".tmp"), os.path.join(directory, name))
    save_checkpoint(directory, params, self.config, metadata)

  def same_config(self, saved_json: str) -> bool:
    # (a config saved before a field existed, e.g. scale_decoder_outputs, is the same architecture)
    return T5Config.from_json(saved_json) == self.config

