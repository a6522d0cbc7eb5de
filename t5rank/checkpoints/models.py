"""Models from checkpoints: which family a checkpoint holds, how to score it, and its `Reranker`.

    settings = scoring_settings(path)         # metadata.json (or t5rank.json beside HF weights),
                                              # read once: model, vocabulary, targets, lengths
    reranker, params = load_reranker(path)    # the family's loader (`t5rank.models.registry`)

A t5rank checkpoint names its model in metadata.json (`model`; monoT5 when absent, as for every
Hugging Face, Mesh TF or t5x checkpoint). Each family's loader reads its own files (the weights,
a vocabulary or word list) and builds its `Reranker`; options a family does not have are refused
by name.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Mapping, Optional

from t5rank.checkpoints import load_checkpoint, native
from t5rank.checkpoints.locate import local_path
from t5rank.checkpoints.hf import is_hf_checkpoint
from t5rank.models import registry
from t5rank.models.classifier import Classifier, ClassifierConfig, MODEL_NAME
from t5rank.models.config import T5Config, get_config
from t5rank.models.dual_encoder import (DualEncoderConfig, DualEncoderReranker, T5DualEncoderConfig,
                                        T5DualEncoderReranker)
from t5rank.models.duot5 import DuoT5
from t5rank.models.inputs import DEFAULT_MAX_LENGTH
from t5rank.models.monot5 import MonoT5
from t5rank.models.reranker import Reranker, cast_params
from t5rank.models.tk import TKConfig
from t5rank.models.tk_reranker import TK
from t5rank.models.vocab import DEFAULT_EXTRA_IDS, Vocabulary, load_vocabulary, resolve_target_words
from t5rank.models.words import load_words

logger = logging.getLogger(__name__)

# Beside the weights of a checkpoint in a format with no room for them (Hugging Face): how to score
# it, {"target_words": ..., "max_length": ..., "bm25_in_input": ...}; `t5rank convert` writes it.
RERANKER_CONFIG = "t5rank.json"


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


def scoring_settings(checkpoint: str, config: Optional[T5Config] = None) -> dict:
  """What a checkpoint says about itself and scoring it, read once (`load_reranker` takes it back;
  `t5rank convert` carries it into another format): {"model": the family's name, "metadata": a
  t5rank checkpoint's metadata.json ({} otherwise), "vocabulary": a SentencePiece file or None,
  "vocabulary_extra_ids", "target_words", "max_length", "bm25_in_input"}, from metadata.json, else
  from a Hugging Face directory's `spiece.model` (with as many of T5's 100 extra ids as `config`'s
  embedding holds; T5's 100 without `config`), `t5rank.json` and `model_type` (mT5: yes/no).
  Values it does not know are None; "model_stated" says whether the checkpoint's own files name
  its family (a t5rank checkpoint's metadata.json `model`, or monoT5 by the trainer's own: a
  `task_name` and no `model`; a Hugging Face directory's `t5rank.json`). Reads no weights."""
  checkpoint = local_path(checkpoint)
  if native.is_native_checkpoint(checkpoint):
    metadata = native.read_metadata(checkpoint)
    vocabulary = metadata.get("vocabulary")
    # the trainer's checkpoints (a task_name) state monoT5 by saying no other; one converted by an
    # earlier t5rank from a Hugging Face duoT5 may say nothing
    stated = "model" in metadata or "task_name" in metadata
    return {"model": metadata.get("model", registry.DEFAULT), "model_stated": stated,
            "metadata": metadata,
            "vocabulary": os.path.join(checkpoint, vocabulary) if vocabulary else None,
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
  return {"model": beside.get("model", registry.DEFAULT), "model_stated": "model" in beside,
          "metadata": {},
          "vocabulary": spiece if extra_ids is not None else None,
          "vocabulary_extra_ids": extra_ids,
          "target_words": beside.get("target_words") or family_target_words(checkpoint),
          "max_length": beside.get("max_length"), "bm25_in_input": beside.get("bm25_in_input")}


def load_reranker(checkpoint: str, *, config_name: Optional[str] = None,
                  options: Optional[Mapping[str, Any]] = None,
                  settings: Optional[dict] = None,
                  model: Optional[str] = None) -> tuple[Reranker, Any]:
  """(reranker, parameters) of `checkpoint` (any format `t5rank.checkpoints.load_checkpoint`
  reads), by the loader of the family its settings name (`scoring_settings`, or `settings` when
  the caller read them already), or of `model` (`--reranker`: what a checkpoint is when its files
  do not say, e.g. a Hugging Face duoT5). `options` are the family's own overrides (for monoT5:
  vocab, targets, dtype, max_length, bm25_in_input), None values meaning "as stored"."""
  checkpoint = local_path(checkpoint)
  settings = settings if settings is not None else scoring_settings(checkpoint)
  check_family(checkpoint, settings, model)
  family = registry.get(model or settings["model"])
  options = {k: v for k, v in (options or {}).items() if v is not None}
  if config_name is not None:
    options["config_name"] = config_name
  return family.part("loader")(checkpoint, settings, **options)


def check_family(checkpoint: str, settings: dict, model: Optional[str]) -> None:
  """Raises ValueError when `model` (`--reranker`) contradicts the family the checkpoint's own
  files state (`scoring_settings`' "model_stated")."""
  if model and settings["model_stated"] and settings["model"] != model:
    raise ValueError(f"{checkpoint} is a {settings['model']} checkpoint (its files say so); "
                     f"--reranker {model} is only for checkpoints that do not say what they are "
                     "(e.g. a Hugging Face duoT5)")


def _refuse(checkpoint: str, family: str, options: Mapping[str, Any], why: str) -> None:
  if options:
    raise ValueError(f"{checkpoint} is a {family} checkpoint; the options "
                     f"{', '.join(sorted(options))} are not its own ({why})")


def default_vocabulary(checkpoint: str) -> Vocabulary:
  """T5's vocabulary, for a checkpoint that names none: refused for a directory with a
  `tokenizer.json` but no `spiece.model` (t5rank tokenizes with SentencePiece: give `--vocab`), with
  a warning for a Hugging Face directory without a tokenizer."""

  if os.path.isfile(os.path.join(checkpoint, "tokenizer.json")):
    raise ValueError(f"{checkpoint} has a tokenizer.json but no spiece.model; t5rank tokenizes "
                     "with SentencePiece: give the checkpoint's SentencePiece model with --vocab")
  if is_hf_checkpoint(checkpoint):
    logger.warning("%s has no spiece.model; tokenizing with T5's vocabulary (give --vocab if the "
                   "model was trained with another)", checkpoint)
  return load_vocabulary()


def _vocabulary(checkpoint: str, settings: dict, vocab: Optional[str]) -> Vocabulary:
  if vocab is not None:
    return load_vocabulary(vocab)
  if settings["vocabulary"] is not None:
    return load_vocabulary(settings["vocabulary"], settings["vocabulary_extra_ids"])
  return default_vocabulary(checkpoint)


def load_monot5(checkpoint: str, settings: dict, **options):
  """(MonoT5, parameters) of `checkpoint` (`load_t5_reranker`)."""
  return load_t5_reranker(MonoT5, checkpoint, settings, **options)


def load_duot5(checkpoint: str, settings: dict, **options):
  """(DuoT5, parameters) of `checkpoint` (`load_t5_reranker`): a duoT5 checkpoint of t5rank, or any
  T5 checkpoint given `--reranker duot5` (castorini's duoT5 in Hugging Face form)."""
  return load_t5_reranker(DuoT5, checkpoint, settings, **options)


def load_t5_reranker(cls, checkpoint: str, settings: dict, *, config_name: Optional[str] = None,
                     vocab: Optional[str] = None, targets=None, dtype: Optional[str] = None,
                     max_length: Optional[int] = None, bm25_in_input: Optional[bool] = None):
  """(`cls` (MonoT5 or DuoT5), parameters) of `checkpoint` (any format): `config_name` for formats
  without a config; `vocab` (a name of `t5rank.models.vocab.VOCABULARIES` or a path), `targets`,
  `max_length` and `bm25_in_input` as given, else as its settings say (`vocabulary`,
  `target_words`, `feature_lengths.inputs`, `bm25_in_input`), else T5's vocabulary, true_false, 512
  and no score. `dtype` ("bfloat16") casts the parameters and the activations; float32 is the
  default and the reference."""

  config, params = load_checkpoint(checkpoint, get_config(config_name) if config_name else None)
  if dtype:
    config = config.replace(dtype=dtype)
    params = cast_params(params, dtype)
  if not settings["metadata"] and settings["vocabulary"] is not None:
    settings = scoring_settings(checkpoint, config)  # a HF vocabulary's extra ids need the config
  vocabulary = _vocabulary(checkpoint, settings, vocab)
  stored_targets = settings["target_words"]
  if isinstance(stored_targets, list):
    stored_targets = tuple(stored_targets)
  target_ids = resolve_target_words(vocabulary, targets or stored_targets or "true_false")
  if max_length is None:
    max_length = settings["max_length"] or DEFAULT_MAX_LENGTH
  if bm25_in_input is None:
    bm25_in_input = bool(settings["bm25_in_input"])
  try:
    reranker = cls(config, vocabulary, target_ids, max_length=max_length,
                   bm25_in_input=bm25_in_input)
  except ValueError as e:
    raise ValueError(f"{checkpoint}: {e}") from None
  return reranker, params


def load_classifier(checkpoint: str, settings: dict, *, config_name: Optional[str] = None,
                    vocab: Optional[str] = None, dtype: Optional[str] = None,
                    max_length: Optional[int] = None, bm25_in_input: Optional[bool] = None,
                    targets=None):
  """(Classifier, parameters) of a classifier checkpoint, with the vocabulary, input length and
  BM25 flag its metadata names unless given. Target words do not apply (refused if given)."""

  if config_name is not None:
    raise ValueError(f"{checkpoint} is a t5rank classifier checkpoint with its own config.json; "
                     "--config is for checkpoints without one")
  if targets is not None:
    raise ValueError(f"{checkpoint} is an encoder-only classifier: it has no target words "
                     "(--targets is for monoT5)")
  config, params = native.restore_model(checkpoint, ClassifierConfig, MODEL_NAME)
  if dtype:
    config = config.replace(t5=config.t5.replace(dtype=dtype))
    params = cast_params(params, dtype)
  vocabulary = (load_vocabulary(vocab) if vocab is not None
                else load_vocabulary(settings["vocabulary"], settings["vocabulary_extra_ids"]))
  try:
    reranker = Classifier(config, vocabulary, max_length=max_length or settings["max_length"] or 512,
                          bm25_in_input=bool(settings["bm25_in_input"]) if bm25_in_input is None
                          else bm25_in_input)
  except ValueError as e:
    raise ValueError(f"{checkpoint}: {e}") from None
  return reranker, params


def load_tk(checkpoint: str, settings: dict, **options):
  """(TK, parameters) of a TK checkpoint (`t5rank train` with a TK gin, or `t5rank ensemble`),
  with the word list it carries; TK has no scoring options, and any given is refused by name."""

  _refuse(checkpoint, "TK", options, "TK reads whole words with its own vocabulary, has no target "
          "words and reads no first-stage score")
  config, params = native.restore_model(checkpoint, TKConfig, TK.name)
  return TK(config, load_words(config, checkpoint)), params


def load_dual_encoder(checkpoint: str, settings: dict, **options):
  """(DualEncoderReranker, parameters) of a dual encoder checkpoint, with the word list it
  carries; it has no scoring options."""

  _refuse(checkpoint, "dual encoder", options, "it averages its own word vectors")
  config, params = native.restore_model(checkpoint, DualEncoderConfig, DualEncoderReranker.name)
  return DualEncoderReranker(config, load_words(config, checkpoint)), params


def load_t5_dual_encoder(checkpoint: str, settings: dict, **options):
  """(T5DualEncoderReranker, parameters) of a T5 dual encoder checkpoint, with the SentencePiece
  model it carries."""

  _refuse(checkpoint, "T5 dual encoder", options, "it mean-pools its own T5 encoder")
  config, params = native.restore_model(checkpoint, T5DualEncoderConfig,
                                        T5DualEncoderReranker.name)
  vocab = Vocabulary(os.path.join(checkpoint, config.vocabulary), extra_ids=0)
  if config.vocabulary_sha256 and vocab.sha256 != config.vocabulary_sha256:
    raise ValueError(f"{vocab.path} is not the vocabulary this T5 dual encoder was built with")
  return T5DualEncoderReranker(config, vocab), params


def t5_dual_encoder_config(checkpoint: str, **fields: Any):
  """The T5DualEncoderConfig of a T5 checkpoint (any format t5rank loads) and its vocabulary
  (gin: `MODEL_CONFIG = @models.t5_dual_encoder_config()`, `checkpoint = %INIT_CHECKPOINT`);
  dropout off (the paper trains without)."""

  reranker, _ = load_reranker(checkpoint)
  if not hasattr(reranker, "vocab") or not isinstance(reranker.config, T5Config):
    raise ValueError(f"{checkpoint} is not a T5 checkpoint")
  return T5DualEncoderConfig(t5=reranker.config.replace(dropout_rate=0.0),
                             vocabulary=reranker.vocab.path,
                             vocabulary_sha256=reranker.vocab.sha256, **fields)


def checkpoint_t5_config(checkpoint: str, **fields: Any) -> T5Config:
  """The T5Config of a T5 checkpoint that carries one (t5rank's, Hugging Face's: a path,
  `shipped:NAME` or a Hub id), without its weights; `fields` replace run settings (`dtype`).
  gin: `MODEL_CONFIG = @models.checkpoint_t5_config()` with `checkpoint = %INIT_CHECKPOINT`, so
  that fine-tuning a public model needs no model gin of its size."""
  from t5rank.checkpoints import detect_format
  from t5rank.checkpoints.hf import CONFIG_FILE, config_from_hf

  path = local_path(checkpoint)
  kind = detect_format(path)
  if kind == "native":
    config = native._read_config(os.path.join(path, native.CONFIG_FILE), T5Config)
  elif kind == "hf":
    with open(os.path.join(path, CONFIG_FILE), encoding="utf-8") as f:
      config = config_from_hf(json.load(f))
  else:
    raise ValueError(f"{checkpoint} is a {kind} checkpoint, which stores no architecture: include "
                     "the model gin of its size (gin/models/*.gin) instead")
  return config.replace(**fields) if fields else config
