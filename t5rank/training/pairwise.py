"""TK's training: pairwise hinge loss on (query, relevant, non-relevant) triples, a `Trainable`.

    triple source (`SOURCES`, seeded order, skipped to the start step, this host's share)
      -> word ids (`t5rank.models.words`; query <= 30, documents <= 200 words; OOV share printed)
      -> batches {query (B, m), positive (B, n), negative (B, n)}, n a multiple of 32
      -> s⁺, s⁻ by TK (the query contextualized once per triple)
      -> loss = mean(max(0, 1 − s⁺ + s⁻)), accuracy = share of s⁺ > s⁻; on a teacher's triples
         (t5rank.data.teacher: each carries the teacher's t⁺, t⁻) Margin-MSE instead,
         mean(((s⁺ − s⁻) − (t⁺ − t⁻))²) (Hofstätter et al. 2020)

The paper (section 3.1): pairwise hinge loss, Adam with a learning rate of 1e-4 for the word
embeddings and the contextualization layers and 1e-3 for the rest (`tk_adam`), batches of 64,
early stopping on validation MRR@10 (`trainer.Loop.keep_best`).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax

from t5rank.checkpoints import native
from t5rank.models.tk_reranker import load_tk
from t5rank.data.tk_triples import SOURCES, tk_batches
from t5rank.models.tk import TKConfig, TKNetwork, init_tk_params, tk_param_axes
from t5rank.models.tk_reranker import TK
from t5rank.models.words import UNK_ID, WORDS_FILE, load_embeddings, load_words
from t5rank.training.trainable import DatasetFn, Trainable, query_document_lengths


def tk_adam(learning_rate, *, other_ratio: float = 10.0) -> optax.GradientTransformation:
  """Adam with the paper's two learning rates: `learning_rate` (1e-4) for the word embeddings and
  the Transformer layers, `other_ratio` times it (1e-3) for the rest (α, the kernel weights W₁, W₂
  and β, γ). `learning_rate` may be an optax schedule; the rest follows it."""
  schedule = learning_rate if callable(learning_rate) else optax.constant_schedule(learning_rate)

  def labels(params):
    return {name: jax.tree.map(lambda _, group=("contextual" if name == "embedding"
                                                 or name.startswith("layer_") else "other"): group,
                               value) for name, value in params.items()}

  return optax.multi_transform(
      {"contextual": optax.adam(schedule), "other": optax.adam(lambda s: other_ratio * schedule(s))},
      labels)


def hinge_loss(positive: jax.Array, negative: jax.Array, margin: float = 1.0) -> jax.Array:
  """mean(max(0, margin − s⁺ + s⁻)) over the batch: the pairwise hinge loss."""
  return jnp.mean(jax.nn.relu(margin - positive + negative))


def margin_mse(positive: jax.Array, negative: jax.Array, teacher_positive: jax.Array,
               teacher_negative: jax.Array) -> jax.Array:
  """mean(((s⁺ − s⁻) − (t⁺ − t⁻))²) over the batch: Margin-MSE (Hofstätter et al. 2020), the
  student's score margin fitted to the teacher's."""
  return jnp.mean(jnp.square((positive - negative) - (teacher_positive - teacher_negative)))


class PairwiseTK(Trainable):
  """TK trained on triples. Its word list is `config.words` (a `t5rank embeddings` directory or a
  words.tsv); `Init.checkpoint` may be that directory (pre-trained embeddings) or a TK checkpoint."""

  @classmethod
  def from_config(cls, config: TKConfig, optimization) -> "PairwiseTK":
    if optimization.dropout_rate:
      raise ValueError(f"TK trains without dropout (the paper's setting; TKConfig has none), but "
                       f"the run sets dropout_rate {optimization.dropout_rate}; set DROPOUT_RATE = "
                       "0.0")
    return cls(config)

  def __init__(self, config: TKConfig):
    self.config = config
    self.vocabulary = load_words(config)

  def check(self, task_name: str, init, optimization, loop) -> None:
    del optimization, loop
    if task_name not in SOURCES:
      raise ValueError(f"TK trains on a triple source of {sorted(SOURCES)}, got {task_name!r}")
    if init.term_matching_heads:
      raise ValueError("term_matching_heads is a T5 initialization; TK has no such heads")

  def init_params(self, rng: jax.Array, init) -> Any:
    params = init_tk_params(self.config, rng)
    if init.checkpoint is None:
      return params

    if native.is_native_checkpoint(init.checkpoint):
      reranker, loaded = load_tk(init.checkpoint)
      if reranker.config != self.config:
        raise ValueError(f"{init.checkpoint} is a TK of another configuration than this run's")
      return loaded
    vocabulary, vectors = load_embeddings(init.checkpoint)
    if vocabulary.sha256 != self.vocabulary.sha256:
      raise ValueError(f"the embeddings in {init.checkpoint} index another word list than the "
                       f"model's ({self.config.words}); build the model from that directory")
    if vectors.shape[1] != self.config.embedding_dim:
      raise ValueError(f"{init.checkpoint} holds {vectors.shape[1]}-d vectors but the model's "
                       f"embedding_dim is {self.config.embedding_dim}")
    params = jax.tree.map(np.asarray, params)
    params["embedding"]["embedding"] = vectors.astype(np.float32)
    return params

  def param_axes(self) -> Any:
    return tk_param_axes(jax.eval_shape(functools.partial(init_tk_params, self.config),
                                        jax.random.PRNGKey(0)))

  def loss_and_metrics(self, params, batch, dropout_rng):
    del dropout_rng  # TK has no dropout
    network = TKNetwork(self.config)
    apply = functools.partial(network.apply, {"params": params})
    query = apply(batch["query"], method=TKNetwork.encode)  # (B, m, E), once for both documents
    query_mask = batch["query"] > UNK_ID

    def score(doc_ids):
      doc = apply(doc_ids, method=TKNetwork.encode)
      return apply(query, query_mask, doc, doc_ids > UNK_ID, method=TKNetwork.score)[0]

    positive, negative = score(batch["positive"]), score(batch["negative"])  # (B,), (B,)
    hinge = hinge_loss(positive, negative)
    accuracy = jnp.mean((positive > negative).astype(jnp.float32))
    metrics = {"accuracy": accuracy, "alpha": params["alpha"]}
    if "positive_score" in batch:  # a teacher's triples: Margin-MSE, the hinge only reported
      loss = margin_mse(positive, negative, batch["positive_score"], batch["negative_score"])
      metrics.update(hinge=hinge, teacher_accuracy=jnp.mean(
          (batch["positive_score"] > batch["negative_score"]).astype(jnp.float32)))
    else:
      loss = hinge
    return loss, {"loss": loss, **metrics}

  def batch_counts(self, batch) -> tuple[int, int]:
    return len(batch["query"]), int(sum((batch[k] > 0).sum()
                                        for k in ("query", "positive", "negative")))

  def dataset_fn(self) -> DatasetFn:
    def dataset(task_name: str, *, batch_size: int, feature_lengths: Mapping[str, int], seed: int,
                start_step: int = 0, pack: bool = False, shard_index: int = 0,
                num_shards: int = 1):
      wanted = query_document_lengths("TK", self.config, feature_lengths, pack)
      return tk_batches(SOURCES[task_name](), self.vocabulary, batch_size=batch_size,
                        query_length=wanted["query"], document_length=wanted["document"],
                        seed=seed, start_step=start_step, shard_index=shard_index,
                        num_shards=num_shards)
    return dataset

  def export(self, directory: str, params, metadata: dict) -> None:
    """A TK checkpoint: words.tsv (copied in first), the parameters, metadata `model: tk`."""

    if jax.process_index() == 0:
      os.makedirs(directory, exist_ok=True)
      self.vocabulary.save(os.path.join(directory, WORDS_FILE))
    native.save_checkpoint(directory, params, self.config, dict(metadata, model=TK.name))
