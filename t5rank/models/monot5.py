"""The monoT5 score, defined once: log P(positive word) from the encoder and ONE decoder step.

    encoder(ids) -> decoder([0]) -> logits of the two target words only -> log-softmax over the two

`MonoT5` is the `t5rank.models.reranker.Reranker` around it: the input template and tokenization
(`t5rank.models.inputs`) and length buckets (`t5rank.models.batching`); `load_monot5` (below, the
family's loader) builds it from a checkpoint with the vocabulary, target words and input options its
files name (`t5rank.models.loading.load_reranker` is the front door). Training-time
evaluation, the `t5rank score` command, the demo and the benchmarks all score through it.
Only the two rows of the output projection are computed, which gives the same numbers as slicing
the full-vocabulary logits (tests/test_score.py checks it to 1e-6).
"""

from __future__ import annotations

import functools
import json
import logging
import os
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp

from t5rank.checkpoints.resolved import Checkpoint, resolve
from t5rank.models import registry
from t5rank.models.batching import BUCKET_STEP, bucket_batches
from t5rank.models.config import T5Config, get_config
from t5rank.models.inputs import (DEFAULT_MAX_LENGTH, ScoreIds, TemplateIds, assemble,
                                  check_truncation)
from t5rank.models.network import T5, param_axes
from t5rank.models.reranker import Batch, Reranker, cast_params
from t5rank.models.vocab import Vocabulary, load_vocabulary, resolve_target_words

logger = logging.getLogger(__name__)


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


class TokenIdsReranker(Reranker):
  """What the rerankers of T5's token ids (monoT5, RankT5, the classifier) batch alike: examples
  that are lists of ids, in length buckets (`bucket_batches`), and T5's parameter axes. Subclasses
  set `config` and `max_length`."""

  def batches(self, examples: Sequence[Sequence[int]], *, batch_tokens: int,
              row_multiple: int = 1, length_bucket: Optional[int] = None) -> list[Batch]:
    return bucket_batches(examples, batch_tokens=batch_tokens, max_length=self.max_length,
                          row_multiple=row_multiple, step=length_bucket or BUCKET_STEP)

  def param_axes(self):
    return param_axes(self.config)

  @property
  def width(self) -> int:
    return self.config.d_model


class MonoT5(TokenIdsReranker):
  """monoT5 as a `Reranker`: `Query: q Document: d Relevant:` (with `bm25_in_input`, `Query: q BM25:
  12 Document: d Relevant:`, `t5rank.data.bm25_input`) cut to `max_length` ids (in the document,
  or with `truncation="input"` at the end of the whole input, as pygaggle: `t5rank.models.inputs`),
  scored by `score_step`: (log P(positive word), P(positive word))."""

  name = "monot5"
  log_probability = True  # log P(positive word)

  def __init__(self, config: T5Config, vocab: Vocabulary, target_ids: tuple[int, int], *,
               max_length: int = DEFAULT_MAX_LENGTH, bm25_in_input: bool = False,
               truncation: str = "document"):
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
    self.truncation = check_truncation(truncation)

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
                     score_ids(first_stage[i]) if self.bm25_in_input else (), self.truncation)
            for i, (q, d) in enumerate(zip(queries, passages))]

  def score_batch(self, params, arrays):
    (tokens,) = arrays
    return score_step(params, tokens, config=self.config, target_ids=self.target_ids)

  def fingerprint(self) -> dict:
    return {"model": self.name, "config": json.loads(self.config.to_json()),
            "vocab": self.vocab.sha256, "targets": list(self.target_ids),
            "max_length": self.max_length, "bm25_in_input": self.bm25_in_input,
            **self.truncation_fingerprint()}

  def truncation_fingerprint(self) -> dict:
    """{"truncation": "input"} when the whole input is cut; {} for the default, so that a scoring
    job begun before the option existed still resumes."""
    return {"truncation": self.truncation} if self.truncation != "document" else {}

  def describe(self) -> str:
    return (f"monoT5 ({self.config.num_parameters / 1e6:.1f}M parameters, {self.config.dtype}, "
            f"targets {self.target_ids}, max_length {self.max_length}"
            f"{', BM25 score in the input' if self.bm25_in_input else ''}"
            f"{', the whole input cut' if self.truncation == 'input' else ''})")

  @classmethod
  def for_evaluation(cls, config, *, vocab: Vocabulary, target_ids: tuple[int, int],
                     max_length: int, bm25_in_input: bool, **_) -> "MonoT5":
    """The reranker of `config` as training-time evaluation scores it (`RerankEval`'s options)."""
    return cls(config, vocab, target_ids, max_length=max_length, bm25_in_input=bm25_in_input)


def load_monot5(checkpoint: Checkpoint, **options) -> tuple[MonoT5, Any]:
  """(MonoT5, parameters) of `checkpoint` (`load_t5_reranker`)."""
  return load_t5_reranker(MonoT5, checkpoint, **options)


def load_t5_reranker(cls, checkpoint: Checkpoint, *, config_name: Optional[str] = None,
                     vocab: Optional[str] = None, targets=None, dtype: Optional[str] = None,
                     max_length: Optional[int] = None, bm25_in_input: Optional[bool] = None,
                     truncation: str = "document"):
  """(`cls` (MonoT5 or DuoT5), parameters) of `checkpoint` (any format): `config_name` for formats
  without a config; `vocab` (a name of `t5rank.models.vocab.VOCABULARIES` or a path), `targets`,
  `max_length` and `bm25_in_input` as given, else as the checkpoint says (`Checkpoint.vocabulary`,
  `.target_words`, `.max_length`, `.bm25_in_input`), else T5's vocabulary, true_false, 512 and no
  score; `truncation` ("document" or "input", `t5rank.models.inputs`). `dtype` ("bfloat16") casts
  the parameters and the activations; float32 is the default and the reference."""
  config, params, vocabulary = load_t5(checkpoint, config_name=config_name, dtype=dtype,
                                       vocab=vocab)
  stored_targets = checkpoint.target_words
  if isinstance(stored_targets, list):
    stored_targets = tuple(stored_targets)
  target_ids = resolve_target_words(vocabulary, targets or stored_targets or "true_false")
  if max_length is None:
    max_length = checkpoint.max_length or DEFAULT_MAX_LENGTH
  if bm25_in_input is None:
    bm25_in_input = bool(checkpoint.bm25_in_input)
  try:
    reranker = cls(config, vocabulary, target_ids, max_length=max_length,
                   bm25_in_input=bm25_in_input, truncation=truncation)
  except ValueError as e:
    raise ValueError(f"{checkpoint.path}: {e}") from None
  return reranker, params


def load_t5(checkpoint: Checkpoint, *, config_name: Optional[str] = None,
            dtype: Optional[str] = None, vocab: Optional[str] = None):
  """(config, parameters, vocabulary) of a T5 `checkpoint` in any format, what every T5 family's
  loader starts from: `config_name` for formats without a config, the parameters cast to `dtype`
  (mixed precision: `t5rank.models.network`), `vocab` (a name or a path) else the vocabulary the
  checkpoint carries (`stored_vocabulary`)."""
  from t5rank.models.t5_weights import load_checkpoint

  config, params = load_checkpoint(checkpoint, get_config(config_name) if config_name else None)
  if dtype:
    config = config.replace(dtype=dtype)
    params = cast_params(params, dtype)
  vocabulary = (load_vocabulary(vocab) if vocab is not None
                else stored_vocabulary(checkpoint, config))
  return config, params, vocabulary


def stored_extra_ids(checkpoint: Checkpoint, config: T5Config) -> Optional[int]:
  """The extra ids of the vocabulary `checkpoint` carries: as its metadata says; for a Hugging Face
  `spiece.model`, as many of T5's 100 as `config`'s embedding holds past its pieces; None without
  a vocabulary."""
  if checkpoint.format == "native" or checkpoint.vocabulary is None:
    return checkpoint.vocabulary_extra_ids
  pieces = Vocabulary(checkpoint.vocabulary, 0).base_vocab_size
  return max(0, min(checkpoint.vocabulary_extra_ids, config.vocab_size - pieces))


def stored_vocabulary(checkpoint: Checkpoint, config: T5Config) -> Vocabulary:
  """The vocabulary `checkpoint` carries (`stored_extra_ids`); for one that names none, T5's:
  refused for a directory with a `tokenizer.json` but no `spiece.model` (t5rank tokenizes with
  SentencePiece: give `--vocab`), with a warning for a Hugging Face directory without a
  tokenizer."""
  if checkpoint.vocabulary is not None:
    return load_vocabulary(checkpoint.vocabulary, stored_extra_ids(checkpoint, config))
  if os.path.isfile(os.path.join(checkpoint.path, "tokenizer.json")):
    raise ValueError(f"{checkpoint.path} has a tokenizer.json but no spiece.model; t5rank "
                     "tokenizes with SentencePiece: give the checkpoint's SentencePiece model with "
                     "--vocab")
  if checkpoint.format == "hf":
    logger.warning("%s has no spiece.model; tokenizing with T5's vocabulary (give --vocab if the "
                   "model was trained with another)", checkpoint.path)
  return load_vocabulary()


def checkpoint_t5_config(checkpoint: str, **fields: Any) -> T5Config:
  """The T5Config of a T5 checkpoint that carries one (t5rank's, Hugging Face's: a path,
  `shipped:NAME` or a Hub id), without its weights; `fields` replace run settings (`dtype`).
  gin: `MODEL_CONFIG = @monot5.checkpoint_t5_config()` with `checkpoint = %INIT_CHECKPOINT`, so
  that fine-tuning a public model needs no model gin of its size."""
  from t5rank.checkpoints import native
  from t5rank.models.t5_weights.hf import config_from_hf

  resolved = resolve(checkpoint)
  if resolved.format == "native":
    config = native._read_config(os.path.join(resolved.path, native.CONFIG_FILE), T5Config)
  elif resolved.format == "hf":
    config = config_from_hf(resolved.hf_config)
  else:
    raise ValueError(f"{checkpoint} is a {resolved.format} checkpoint, which stores no "
                     "architecture: include the model gin of its size (gin/models/*.gin) instead")
  return config.replace(**fields) if fields else config


registry.register(registry.Family(
    name=MonoT5.name, config=T5Config, reranker=MonoT5,
    trainable="t5rank.training.seq2seq.Seq2Seq", loader=load_monot5,
    encoder="t5rank.retrieval.encoders.t5_mean_encoder",
    description="T5 scoring P(true) of `Query: q Document: d Relevant:` (Nogueira et al. 2020)"))
