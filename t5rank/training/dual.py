"""The dual encoder's training (`t5rank.models.dual_encoder`), a `Trainable`:

    the pairs and batches of `t5rank.data.dual_pairs` (InsuranceQA question → answer pairs or
      XPI's sentence pairs; no answer and no question twice in a batch; word ids)
      -> the config's loss over the B × B similarity matrix (B × 2B with pool negatives)

The paper (section 2.2): momentum SGD at a fixed learning rate of .01 (`momentum_sgd`; momentum .9,
the paper gives no value), batches of 1000, no dropout, early stopping on in-batch precision@1 on a
tuning set (`InBatchEval` on InsuranceQA's validation pairs, `trainer.Loop.keep_best = "p@1"`).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Mapping, Optional

import jax
import numpy as np
import optax

from t5rank.checkpoints import native
from t5rank.data.dual_pairs import (Encoder, Pairs, PieceEncoder, distinct_batches,
                                    pair_batches, pair_source)
from t5rank.models import dual_encoder, registry
from t5rank.models.dual_encoder import DualEncoderConfig, T5DualEncoderConfig
from t5rank.models.network import init_params
from t5rank.models.t5_weights import load_checkpoint
from t5rank.models.vocab import Vocabulary
from t5rank.models.words import WORDS_FILE, load_embeddings, load_words
from t5rank.training.trainable import DatasetFn, Trainable, query_document_lengths

MODEL_NAME, T5_MODEL_NAME = "dual_encoder", "t5_dual_encoder"
def momentum_sgd(learning_rate, momentum: float = 0.9) -> optax.GradientTransformation:
  """The paper's optimizer: SGD with momentum (`learning_rate` .01 in the run gin)."""
  return optax.sgd(learning_rate, momentum=momentum)


def _metrics(params, loss, accuracy) -> dict:
  """What a training step logs: the loss, the in-batch accuracy, α, β (and γ when distilled)."""
  return {"loss": loss, "accuracy": accuracy,
          **{k: params[k] for k in ("scale", "bias", "margin_scale") if k in params}}


def _teacher(batch) -> Optional[dict]:
  """A distillation batch's teacher scores (`pair_batches`), else None."""
  if "positive_score" not in batch:
    return None
  return {k: batch[k] for k in ("positive_score", "negative_score", "score_mask")}


class DualEncoder(Trainable):
  """The word-averaging dual encoder trained on question → answer pairs. `Init.checkpoint` may be
  a `t5rank embeddings` directory (its vectors start the embeddings) or a dual encoder checkpoint."""

  def __init__(self, config: DualEncoderConfig):
    self.config = config
    self.vocabulary = load_words(config)

  def check(self, task_name: str, init, optimization, loop) -> None:
    language, strategy = pair_source(task_name)
    distilled = getattr(self.config, "loss", None) == "in_batch_softmax_margin_mse"
    if distilled != (strategy == "teacher"):
      raise ValueError("the in_batch_softmax_margin_mse loss trains on a teacher's scores and a "
                       "teacher's pairs train with it: set LOSS = 'in_batch_softmax_margin_mse' "
                       "with MIXTURE_OR_TASK_NAME = @tk_triples.teacher_task(), or neither "
                       f"(got loss {getattr(self.config, 'loss', None)!r}, task {task_name!r})")
    if strategy == "mixed" and getattr(self.config, "loss", None) == "cross_entropy":
      raise ValueError("the cross_entropy loss draws negatives from the question's pool, in the "
                       "question's language: with the mixed strategy's pairs the language would "
                       "tell the positive answer from the negatives; use an in-batch loss")
    evaluated = getattr(loop.eval_fn, "language", language)
    if evaluated != language:
      raise ValueError(f"task {task_name} trains on {language} pairs but the evaluation reads "
                       f"{evaluated} ones; set LANGUAGE = {language!r} in the run gin")
    if init.term_matching_heads:
      raise ValueError("term_matching_heads is a T5 initialization; the dual encoder has no heads")
    if optimization.dropout_rate:
      raise ValueError(f"the dual encoder trains without dropout (the paper's setting), but the "
                       f"run sets dropout_rate {optimization.dropout_rate}")

  def init_params(self, rng: jax.Array, init) -> Any:
    params = dual_encoder.init_params(self.config, rng)
    if init.checkpoint is None:
      return params

    if native.is_native_checkpoint(init.checkpoint):
      config, loaded = native.restore_model(init.checkpoint, DualEncoderConfig, MODEL_NAME)
      shape = ("vocabulary_sha256", "vocab_size", "embedding_dim", "shared")
      if any(getattr(config, f) != getattr(self.config, f) for f in shape):
        raise ValueError(f"{init.checkpoint} is a dual encoder of another word list or shape "
                         f"({', '.join(shape)} differ)")
      # γ belongs to the distillation loss: a fresh one when this run distils from a checkpoint
      # trained without it, none when this run does not distil
      loaded = {k: v for k, v in loaded.items() if k != "margin_scale"}
      if "margin_scale" in params:
        loaded["margin_scale"] = params["margin_scale"]
      return loaded
    vocabulary, vectors = load_embeddings(init.checkpoint)
    if vocabulary.sha256 != self.vocabulary.sha256 or vectors.shape[1] != self.config.embedding_dim:
      raise ValueError(f"the embeddings in {init.checkpoint} ({vectors.shape[1]}-d) are not of the "
                       f"model's word list and size ({self.config.words}, "
                       f"{self.config.embedding_dim}-d)")
    params = jax.tree.map(np.asarray, params)
    for side in ("query", "document"):
      if side in params:
        params[side]["embedding"] = vectors.astype(np.float32)
    return params

  def param_axes(self) -> Any:
    return dual_encoder.model_axes(self.config)

  def loss_and_metrics(self, params, batch, dropout_rng):
    del dropout_rng
    loss, accuracy = dual_encoder.loss_and_accuracy(params, self.config, batch["query"],
                                                    batch["document"], batch.get("label"),
                                                    _teacher(batch))
    return loss, _metrics(params, loss, accuracy)

  def batch_counts(self, batch) -> tuple[int, int]:
    return len(batch["query"]), int((batch["query"] > 0).sum() + (batch["document"] > 0).sum())

  def dataset_fn(self) -> DatasetFn:
    def dataset(task_name: str, *, batch_size: int, feature_lengths: Mapping[str, int], seed: int,
                start_step: int = 0, pack: bool = False, shard_index: int = 0,
                num_shards: int = 1):
      query_document_lengths("the dual encoder", self.config, feature_lengths, pack)
      return pair_batches(Pairs.source(task_name, "train"),
                          self.text_encoder(), self.config, batch_size=batch_size, seed=seed,
                          start_step=start_step, shard_index=shard_index, num_shards=num_shards)
    return dataset

  def text_encoder(self) -> Encoder:
    return Encoder(self.vocabulary)

  def export(self, directory: str, params, metadata: dict) -> None:
    """A dual encoder checkpoint: words.tsv, the parameters, metadata `model: dual_encoder`."""

    if jax.process_index() == 0:
      os.makedirs(directory, exist_ok=True)
      self.vocabulary.save(os.path.join(directory, WORDS_FILE))
    native.save_checkpoint(directory, params, self.config, dict(metadata, model=MODEL_NAME))


class T5DualEncoder(DualEncoder):
  """The T5-encoder variant (`dual_encoder.T5DualEncoderConfig`): T5's encoder mean-pooled, trained
  like the averaged-embedding model. `Init.checkpoint`: a T5 checkpoint of the config's
  architecture (any format t5rank loads), a T5 dual encoder checkpoint, or None (random)."""

  def __init__(self, config: T5DualEncoderConfig):
    self.config = config
    self.vocabulary = Vocabulary(config.vocabulary, extra_ids=0)
    if config.vocabulary_sha256 and self.vocabulary.sha256 != config.vocabulary_sha256:
      raise ValueError(f"{config.vocabulary} is not the vocabulary this T5 dual encoder was built "
                       "with")

  def init_params(self, rng: jax.Array, init) -> Any:

    head = {"scale": np.float32(self.config.scale_init), "bias": np.float32(0.0)}
    if init.checkpoint is None:
      return {"t5": init_params(self.config.t5, rng), **head}
    if native.read_metadata(init.checkpoint).get("model") == T5_MODEL_NAME:
      config, loaded = native.restore_model(init.checkpoint, T5DualEncoderConfig,
                                             T5_MODEL_NAME)
      if config.t5 != self.config.t5:
        raise ValueError(f"{init.checkpoint} is a T5 dual encoder of another architecture")
      return loaded
    return {"t5": load_checkpoint(init.checkpoint, config=self.config.t5)[1], **head}


  def loss_and_metrics(self, params, batch, dropout_rng):
    del dropout_rng  # trained without dropout, as the paper's dual encoder
    q = dual_encoder.t5_mean(params["t5"], self.config.t5, batch["query"])
    d = dual_encoder.t5_mean(params["t5"], self.config.t5, batch["document"])
    loss, accuracy = dual_encoder.vector_loss(q, d, params["scale"], params["bias"],
                                              self.config.loss, self.config.margin,
                                              batch.get("label"), _teacher(batch),
                                              getattr(self.config, "margin_mse_weight", 1.0),
                                              params.get("margin_scale"))
    return loss, _metrics(params, loss, accuracy)

  def text_encoder(self) -> Encoder:
    return PieceEncoder(self.vocabulary)

  def export(self, directory: str, params, metadata: dict) -> None:
    """A T5 dual encoder checkpoint: the SentencePiece model (copied in first), the parameters,
    metadata `model: t5_dual_encoder`."""
    import shutil

    name = os.path.basename(self.config.vocabulary)
    if jax.process_index() == 0:
      os.makedirs(directory, exist_ok=True)
      shutil.copyfile(self.config.vocabulary, os.path.join(directory, name))
    native.save_checkpoint(directory, params, self.config.replace(vocabulary=name),
                           dict(metadata, model=T5_MODEL_NAME))


class InBatchEval:
  """The paper's early-stopping measure: in-batch precision@1 over fixed batches of `batch_size`
  distinct (question, answer) pairs of an InsuranceQA split (seed 0; or of `data`; `language`
  en, zh, or enzh for the mixed strategy's pairs in both languages), the share of questions whose
  own answer scores highest of the batch's answers (`p@1`), and the in-batch softmax loss
  (`loss`, at the model's α and β). Gin: `trainer.Loop.eval_fn = @dual.InBatchEval()`."""

  def __init__(self, split: str = "validation", batch_size: int = 1000, language: str = "en",
               max_batches: int = 4, data: Optional[Pairs] = None):
    self.language = language
    if data is None:  # "enzh": the mixed strategy's pairs, half of them across languages
      data = (Pairs.cross_lingual(split, "mixed") if language == "enzh"
              else Pairs.insuranceqa(split, language))
    self.data = data
    order = distinct_batches(self.data.batch_keys, batch_size, seed=0)
    total = len(self.data.pairs) // batch_size
    self.batches = [next(order) for _ in range(max(1, min(max_batches, total)))]
    self._encoded: dict = {}

  def __call__(self, params, config) -> Mapping[str, float]:
    if config not in self._encoded:

      encoder = registry.for_config(config).part("trainable")(config).text_encoder()
      self._encoded = {config: [
          (encoder([self.data.questions[self.data.pairs[i][0]] for i in batch],
                   config.max_query_length),
           encoder([self.data.answers[self.data.pairs[i][1]] for i in batch],
                   config.max_document_length)) for batch in self.batches]}
    values = [_in_batch(params, q, d, config=config) for q, d in self._encoded[config]]
    return {"p@1": float(np.mean([v[0] for v in values])),
            "loss": float(np.mean([v[1] for v in values]))}


@functools.partial(jax.jit, static_argnames="config")
def _in_batch(params, query_ids, document_ids, *, config):
  cos = (dual_encoder.side_vectors(params, config, query_ids, "query")
         @ dual_encoder.side_vectors(params, config, document_ids, "document").T)
  return (dual_encoder.in_batch_precision_at_1(cos),
          dual_encoder.in_batch_softmax(params["scale"] * cos + params["bias"]))
