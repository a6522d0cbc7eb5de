"""The monoT5 score, defined once: log P(positive word) from the encoder and ONE decoder step.

    encoder(ids) -> decoder([0]) -> logits of the two target words only -> log-softmax over the two

`MonoT5` is the `t5rank.models.reranker.Reranker` around it: the input template and tokenization
(`t5rank.models.inputs`), length buckets (`t5rank.ranking.batching`), and loading from a checkpoint
with the vocabulary, target words and input options its metadata.json names. Training-time
evaluation, the `t5rank score` command, the demo and the benchmarks all score through it.
Only the two rows of the output projection are computed, which gives the same numbers as slicing
the full-vocabulary logits (tests/test_score.py checks it to 1e-6).
"""

from __future__ import annotations

import functools
import json
import logging
import os
from typing import Optional, Sequence

import jax
import jax.numpy as jnp

from t5rank.models.config import T5Config
from t5rank.models.inputs import DEFAULT_MAX_LENGTH, ScoreIds, TemplateIds, assemble
from t5rank.models.network import T5, param_axes
from t5rank.models.reranker import Batch, Reranker, cast_params
from t5rank.models.vocab import TargetSpec, Vocabulary


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


class MonoT5(Reranker):
  """monoT5 as a `Reranker`: `Query: q Document: d Relevant:` (with `bm25_in_input`, `Query: q BM25:
  12 Document: d Relevant:`, `t5rank.data.bm25_input`) cut to `max_length` ids, scored by
  `score_step`: (log P(positive word), P(positive word))."""

  name = "monot5"

  def __init__(self, config: T5Config, vocab: Vocabulary, target_ids: tuple[int, int], *,
               max_length: int = DEFAULT_MAX_LENGTH, bm25_in_input: bool = False):
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
                     score_ids(first_stage[i]) if self.bm25_in_input else ())
            for i, (q, d) in enumerate(zip(queries, passages))]

  def batches(self, examples: Sequence[Sequence[int]], *, batch_tokens: int,
              row_multiple: int = 1, length_bucket: Optional[int] = None) -> list[Batch]:
    from t5rank.ranking.batching import BUCKET_STEP, bucket_batches

    return bucket_batches(examples, batch_tokens=batch_tokens, max_length=self.max_length,
                          row_multiple=row_multiple, step=length_bucket or BUCKET_STEP)

  def score_batch(self, params, arrays):
    (tokens,) = arrays
    return score_step(params, tokens, config=self.config, target_ids=self.target_ids)

  def param_axes(self):
    return param_axes(self.config)

  def fingerprint(self) -> dict:
    return {"model": self.name, "config": json.loads(self.config.to_json()),
            "vocab": self.vocab.sha256, "targets": list(self.target_ids),
            "max_length": self.max_length, "bm25_in_input": self.bm25_in_input}

  def describe(self) -> str:
    return (f"monoT5 ({self.config.num_parameters / 1e6:.1f}M parameters, {self.config.dtype}, "
            f"targets {self.target_ids}, max_length {self.max_length}"
            f"{', BM25 score in the input' if self.bm25_in_input else ''})")

  @classmethod
  def load(cls, checkpoint: str, *, config_name: Optional[str] = None, vocab: Optional[str] = None,
           targets: Optional[TargetSpec] = None, dtype: Optional[str] = None,
           max_length: Optional[int] = None, bm25_in_input: Optional[bool] = None):
    """(MonoT5, parameters) of `checkpoint` (any format): `config_name` for formats without a
    config; `vocab` (a name of `t5rank.models.vocab.VOCABULARIES` or a path), `targets`,
    `max_length` and `bm25_in_input` as given, else as the t5rank checkpoint's metadata.json says
    (`vocabulary`, `target_words`, `feature_lengths.inputs`, `bm25_in_input`), else T5's
    vocabulary, true_false, 512 and no score. `dtype` ("bfloat16") casts the parameters and the
    activations; float32 is the default and the reference."""
    from t5rank.checkpoints import load_checkpoint
    from t5rank.models.config import get_config
    from t5rank.models.vocab import load_vocabulary, resolve_target_words

    config, params = load_checkpoint(checkpoint, get_config(config_name) if config_name else None)
    if dtype:
      config = config.replace(dtype=dtype)
      params = cast_params(params, dtype)
    stored = scoring_settings(checkpoint, config)
    if vocab is not None:
      vocabulary = load_vocabulary(vocab)
    elif stored["vocabulary"] is not None:
      vocabulary = load_vocabulary(stored["vocabulary"], stored["vocabulary_extra_ids"])
    else:
      vocabulary = default_vocabulary(checkpoint)
    stored_targets = stored["target_words"]
    if isinstance(stored_targets, list):
      stored_targets = tuple(stored_targets)
    target_ids = resolve_target_words(vocabulary, targets or stored_targets or "true_false")
    if max_length is None:
      max_length = stored["max_length"] or DEFAULT_MAX_LENGTH
    if bm25_in_input is None:
      bm25_in_input = bool(stored["bm25_in_input"])
    try:
      reranker = cls(config, vocabulary, target_ids, max_length=max_length,
                     bm25_in_input=bm25_in_input)
    except ValueError as e:
      raise ValueError(f"{checkpoint}: {e}") from None
    return reranker, params


# Beside the weights of a checkpoint in a format with no room for them (Hugging Face): how to score
# it, {"target_words": ..., "max_length": ..., "bm25_in_input": ...}; `t5rank convert` writes it.
RERANKER_CONFIG = "t5rank.json"
logger = logging.getLogger(__name__)


def beside_weights(checkpoint: str) -> dict:
  """The JSON object of `t5rank.json` in the checkpoint's directory (e.g. `{"target_words":
  ["yes", "no"]}` beside an mT5 reranker's Hugging Face files), or {}."""
  path = os.path.join(checkpoint, RERANKER_CONFIG)
  if not os.path.isfile(path):
    return {}
  with open(path, encoding="utf-8") as f:
    try:
      value = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not JSON ({e})") from None
  if not isinstance(value, dict):
    raise ValueError(f"{path}: expected a JSON object such as "
                     '{"target_words": ["yes", "no"]}')
  return value


def family_target_words(checkpoint: str) -> str:
  """The target words of the reranker family a checkpoint belongs to: `yes_no` for a Hugging Face
  mT5 (`model_type` mt5: the mT5 rerankers' words), else monoT5's `true_false`."""
  path = os.path.join(checkpoint, "config.json")
  if os.path.isfile(path) and not os.path.isfile(os.path.join(checkpoint, "metadata.json")):
    with open(path, encoding="utf-8") as f:
      if json.load(f).get("model_type") == "mt5":
        return "yes_no"
  return "true_false"


def default_vocabulary(checkpoint: str) -> Vocabulary:
  """T5's vocabulary, for a checkpoint that names none: refused for a directory with a
  `tokenizer.json` but no `spiece.model` (t5rank tokenizes with SentencePiece: give `--vocab`), with
  a warning for a Hugging Face directory without a tokenizer."""
  from t5rank.checkpoints.hf import is_hf_checkpoint
  from t5rank.models.vocab import load_vocabulary

  if os.path.isfile(os.path.join(checkpoint, "tokenizer.json")):
    raise ValueError(f"{checkpoint} has a tokenizer.json but no spiece.model; t5rank tokenizes "
                     "with SentencePiece: give the checkpoint's SentencePiece model with --vocab")
  if is_hf_checkpoint(checkpoint):
    logger.warning("%s has no spiece.model; tokenizing with T5's vocabulary (give --vocab if the "
                   "model was trained with another)", checkpoint)
  return load_vocabulary()


def scoring_settings(checkpoint: str, config: Optional[T5Config] = None) -> dict:
  """What a checkpoint says about scoring it (`MonoT5.load` reads it; `t5rank convert` carries it
  into another format): {"vocabulary": SentencePiece file or None (none named),
  "vocabulary_extra_ids", "target_words", "max_length", "bm25_in_input"}, from a t5rank
  checkpoint's metadata.json, else from a Hugging Face directory's `spiece.model` (with as many of
  T5's 100 extra ids as `config`'s embedding holds; T5's 100 without `config`), `t5rank.json` and
  `model_type` (mT5: yes/no). Values it does not know are None. Reads no weights."""
  from t5rank.checkpoints import native
  from t5rank.models.vocab import DEFAULT_EXTRA_IDS

  if native.is_native_checkpoint(checkpoint):
    metadata = native.read_metadata(checkpoint)
    vocabulary = metadata.get("vocabulary")
    return {"vocabulary": os.path.join(checkpoint, vocabulary) if vocabulary else None,
            "vocabulary_extra_ids": metadata.get("vocabulary_extra_ids"),
            "target_words": metadata.get("target_words"),
            "max_length": metadata.get("feature_lengths", {}).get("inputs"),
            "bm25_in_input": metadata.get("bm25_in_input")}
  beside = beside_weights(checkpoint)
  spiece = os.path.join(checkpoint, "spiece.model")
  extra_ids = None
  if os.path.isfile(spiece):
    extra_ids = DEFAULT_EXTRA_IDS
    if config is not None:
      pieces = Vocabulary(spiece, 0).base_vocab_size
      extra_ids = max(0, min(DEFAULT_EXTRA_IDS, config.vocab_size - pieces))
  return {"vocabulary": spiece if extra_ids is not None else None,
          "vocabulary_extra_ids": extra_ids,
          "target_words": beside.get("target_words") or family_target_words(checkpoint),
          "max_length": beside.get("max_length"), "bm25_in_input": beside.get("bm25_in_input")}
