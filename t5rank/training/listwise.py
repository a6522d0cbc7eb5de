"""RankT5's training: ranking losses over lists of documents per query, a `Trainable` per family.

    a TripleSource task's table (its "train" split; its vocabulary) -> lists of m documents per
    query, the relevant one and m - 1 sampled negatives (`t5rank.data.ranking_lists`)
      -> (b, m, L) ids -> (b * m, L) -> the family's score: RankT5 Encoder-Decoder's logit of
         <extra_id_10> (`t5rank.models.rankt5.rankt5_score`) or Encoder-only's dense head
         (`t5rank.models.rankt5_encoder.rankt5_encoder_score`) -> (b, m)
      -> the run's ranking loss (`Optimization.ranking_loss`, default the listwise softmax cross
         entropy; `t5rank.training.ranking_losses`)
      -> metrics: loss, accuracy (share of lists whose relevant document scores highest)

Zhuang et al., SIGIR 2023, "RankT5: Fine-Tuning T5 for Text Ranking with Ranking Losses"; the gin
recipe is gin/runs/rankt5_listwise.gin. feature_lengths: {"inputs": L, "list_size": m} (the
authors' T5X recipe writes the list size into its feature lengths the same way, `(LIST_SIZE, L)`).
The SeqIO task is read for its source table and vocabulary only (and whether it writes each pair's
BM25 score into the input: then RankT5 does too, `Query: q BM25: 12 Document: d`, and its checkpoint
says `bm25_in_input`); its monoT5 preprocessing is not used. Training-time evaluation (`RerankEval`) is refused: it picks the family from the config's
class, and a T5Config would be scored as monoT5.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.checkpoints import native
from t5rank.models import rankt5, rankt5_encoder
from t5rank.models.config import T5Config
from t5rank.models.t5_weights import load_checkpoint, save_checkpoint
from t5rank.training.ranking_losses import RankingLoss, softmax_cross_entropy
from t5rank.training.trainable import DatasetFn, Trainable

FEATURES = ("inputs", "list_size")


def _task_source(task_name: str):
  """(the task's TripleSource, its vocabulary); ValueError for a task without one."""
  import seqio

  import t5rank.tasks  # noqa: F401  (registers the tasks)
  from t5rank.data.seqio_tasks import TripleSource, task_vocabulary

  if task_name not in seqio.TaskRegistry.names():
    raise ValueError(f"RankT5 trains on the lists of a registered task with a triple table "
                     f"(e.g. generic_monot5_true_false, insuranceqa_en_monot5_true_false); "
                     f"{task_name!r} is not one")
  source = seqio.get_mixture_or_task(task_name).source
  if not isinstance(source, TripleSource):
    raise ValueError(f"task {task_name} reads no triple table (its source is a "
                     f"{type(source).__name__}); RankT5's lists are drawn from one")
  return source, task_vocabulary(task_name)


def list_accuracy(scores: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
  """The share of lists whose best relevant real document scores strictly above every other real
  document: a tie is a miss, so a model that scores all documents alike (the relevant one is
  first in every list, `t5rank.data.ranking_lists`) ranks none first."""
  best_relevant = jnp.max(jnp.where(mask & (labels > 0), scores, -jnp.inf), axis=-1)  # (B,)
  best_other = jnp.max(jnp.where(mask & (labels <= 0), scores, -jnp.inf), axis=-1)
  return jnp.mean((best_relevant > best_other).astype(jnp.float32))


class Listwise(Trainable):
  """What both RankT5 families share: lists, the loss, checks and the export. Subclasses give
  `model_name`, `t5` (the T5Config of the network), `scores`, `init_params` and `param_axes`."""

  model_name: str

  def __init__(self, config, ranking_loss: Optional[RankingLoss] = None):
    self.config = config
    self.ranking_loss = ranking_loss or softmax_cross_entropy

  @property
  def t5(self) -> T5Config:
    raise NotImplementedError

  def scores(self, params, tokens: jax.Array, dropout_rng: Optional[jax.Array]) -> jax.Array:
    """(N,) scores of (N, L) ids."""
    raise NotImplementedError

  def check(self, task_name: str, init, optimization, loop) -> None:
    from t5rank.training.seq2seq import check_init_vocabulary, check_vocabulary

    del optimization
    _, vocab = _task_source(task_name)
    check_vocabulary(vocab, self.t5, task_name)
    if init.checkpoint is not None and not native.is_native_checkpoint(init.checkpoint):
      check_init_vocabulary(init.checkpoint, vocab, task_name)
    if init.term_matching_heads and (init.checkpoint is not None
                                     or self.model_name != rankt5.MODEL_NAME):
      raise ValueError(f"term_matching_heads initializes a T5 network from random weights (monoT5, "
                       f"RankT5 Encoder-Decoder); {self.model_name}"
                       f"{' from a checkpoint' if init.checkpoint is not None else ''} does not "
                       "take it")
    if loop.eval_fn is not None:
      raise ValueError(f"training-time evaluation scores a T5Config as monoT5, not as "
                       f"{self.model_name}: train without Loop.eval_fn and score MODEL_DIR/final "
                       f"with `t5rank score --reranker {self.model_name}`")

  def loss_and_metrics(self, params, batch, dropout_rng):
    tokens = batch["encoder_input_tokens"]  # (B, m, L)
    b, m, length = tokens.shape
    scores = self.scores(params, tokens.reshape(b * m, length), dropout_rng).reshape(b, m)
    labels, mask = batch["labels"].astype(jnp.float32), batch["mask"].astype(bool)
    loss = self.ranking_loss(scores, labels, mask)
    return loss, {"loss": loss, "accuracy": list_accuracy(scores, labels, mask)}

  def batch_counts(self, batch) -> tuple[int, int]:
    return len(batch["labels"]), int((batch["encoder_input_tokens"] > 0).sum())

  def dataset_fn(self) -> DatasetFn:
    from t5rank.data.ranking_lists import list_batches

    def lists(task_name: str, *, batch_size: int, feature_lengths: Mapping[str, int], seed: int,
              start_step: int = 0, pack: bool = False, shard_index: int = 0, num_shards: int = 1):
      if pack:
        raise ValueError(f"{self.model_name} scores each document of a list alone: PACK = False")
      if sorted(feature_lengths) != sorted(FEATURES):
        raise ValueError(f"{self.model_name}'s feature lengths are {{'inputs': L, 'list_size': "
                         f"m}}, got {dict(feature_lengths)}")
      source, vocab = _task_source(task_name)
      length = feature_lengths["inputs"]
      table = source.table("train")
      from t5rank.data.seqio_tasks import task_bm25_in_input  # seqio, tensorflow: when training

      bm25 = task_bm25_in_input(task_name)
      if bm25 and not table.scored:
        raise ValueError(f"task {task_name} writes the BM25 score into its inputs but its "
                         "training table has no scores")
      return list_batches(table,
                          lambda q, d, s: rankt5.encode_rankt5(vocab, q, d, length,
                                                               s if bm25 else None),
                          batch_size=batch_size, list_size=feature_lengths["list_size"],
                          input_length=length, seed=seed, start_step=start_step,
                          shard_index=shard_index, num_shards=num_shards)
    return lists

  def export(self, directory: str, params, metadata: dict) -> None:
    """A t5rank checkpoint of the family (`model` in its metadata) with the task's vocabulary file
    (copied in before config.json marks the checkpoint complete) and the input length."""
    _, vocab = _task_source(metadata["task_name"])
    name = os.path.basename(vocab.path)
    metadata = dict(metadata, model=self.model_name, vocabulary=name,
                    vocabulary_extra_ids=vocab.extra_ids,
                    max_length=metadata["feature_lengths"]["inputs"])
    from t5rank.data.seqio_tasks import task_bm25_in_input

    if task_bm25_in_input(metadata["task_name"]):  # scoring writes the candidates' scores alike
      metadata["bm25_in_input"] = True
    if jax.process_index() == 0:
      os.makedirs(directory, exist_ok=True)
      shutil.copyfile(vocab.path, os.path.join(directory, name + ".tmp"))
      os.replace(os.path.join(directory, name + ".tmp"), os.path.join(directory, name))
    save_checkpoint(directory, params, self.config, metadata)


class RankT5Listwise(Listwise):
  """RankT5 Encoder-Decoder (`t5rank.models.rankt5`). `Init.checkpoint`: any T5 checkpoint."""

  model_name = rankt5.MODEL_NAME

  @classmethod
  def from_config(cls, config: T5Config, optimization) -> "RankT5Listwise":
    return cls(config.replace(dropout_rate=optimization.dropout_rate), optimization.ranking_loss)

  @property
  def t5(self) -> T5Config:
    return self.config

  def check(self, task_name: str, init, optimization, loop) -> None:
    """`Listwise.check`; also fixes the score token's id by the task's vocabulary (<extra_id_10>:
    32089 in T5's, whatever padding rows the embedding has past it; `<unk>` in a vocabulary
    without extra ids: `rankt5.score_token_id`)."""
    super().check(task_name, init, optimization, loop)
    self.score_id = rankt5.score_token_id(_task_source(task_name)[1])

  def scores(self, params, tokens, dropout_rng):
    if getattr(self, "score_id", None) is None:
      raise ValueError("the score token's id comes from the task's vocabulary: call check first")
    return rankt5.rankt5_score(params, tokens, config=self.config, score_id=self.score_id,
                               dropout_rng=dropout_rng)

  def init_params(self, rng: jax.Array, init) -> Any:
    from t5rank.training.seq2seq import init_t5_params

    return init_t5_params(self.config, rng, init)

  def param_axes(self) -> Any:
    from t5rank.models.network import param_axes
    return param_axes(self.config)

  def same_config(self, saved_json: str) -> bool:
    return T5Config.from_json(saved_json) == self.config


class RankT5EncoderListwise(Listwise):
  """RankT5 Encoder-only (`t5rank.models.rankt5_encoder`). `Init.checkpoint`: a T5 checkpoint
  (its encoder and embedding kept, the head random), a rankt5_encoder checkpoint, or None."""

  model_name = rankt5_encoder.MODEL_NAME

  @classmethod
  def from_config(cls, config, optimization) -> "RankT5EncoderListwise":
    return cls(config.replace(t5=config.t5.replace(dropout_rate=optimization.dropout_rate)),
               optimization.ranking_loss)

  @property
  def t5(self) -> T5Config:
    return self.config.t5

  def scores(self, params, tokens, dropout_rng):
    return rankt5_encoder.rankt5_encoder_score(params, tokens, config=self.config.t5,
                                               dropout_rng=dropout_rng)

  def init_params(self, rng: jax.Array, init) -> Any:
    from t5rank.models import classifier

    if init.checkpoint is None:
      return rankt5_encoder.init_params(self.config, rng)
    if native.is_native_checkpoint(init.checkpoint) and (
        native.read_metadata(init.checkpoint).get("model") == self.model_name):
      config, params = native.restore_model(init.checkpoint, rankt5_encoder.RankT5EncoderConfig,
                                             self.model_name)
      if config.t5.replace(dropout_rate=self.config.t5.dropout_rate) != self.config.t5:
        raise ValueError(f"{init.checkpoint} is a {self.model_name} of another architecture")
      return params
    t5_params = load_checkpoint(init.checkpoint, config=self.config.t5)[1]
    return {"t5": classifier.encoder_params(t5_params),
            "head": rankt5_encoder.init_head(jax.random.fold_in(rng, 2), self.config.t5.d_model)}

  def param_axes(self) -> Any:
    return rankt5_encoder.param_axes(self.config)

  def same_config(self, saved_json: str) -> bool:
    return rankt5_encoder.RankT5EncoderConfig.from_json(saved_json) == self.config
