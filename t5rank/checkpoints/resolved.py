"""A checkpoint resolved once: what a user named, read into one value that everything downstream
takes (the loaders, `t5rank convert`, the cascade, the Python front door).

    checkpoint = resolve("shipped:monot5")     # or a path, or a Hub id ORG/NAME[@REVISION]
    checkpoint.path, checkpoint.format         # the local directory, one of `FORMATS`
    checkpoint.metadata                        # metadata.json of a t5rank checkpoint, read here once
    checkpoint.family, checkpoint.family_stated

`resolve` turns the name into a local path (`t5rank.checkpoints.locate`), detects the format and
reads the small JSON files that say what the checkpoint is and how to score it: a t5rank
checkpoint's metadata.json; a Hugging Face directory's config.json; in a directory of another
format, t5rank's `t5rank.json` (`{"model": "duot5", "target_words": ..., "max_length": ..., "bm25_in_input": ...}`,
written by `t5rank convert`). It reads no weights.

The family is a name of `t5rank.models.registry`: a t5rank checkpoint's metadata.json `model`; a
Hugging Face directory's `t5rank.json` `model`; else monoT5, the family of every checkpoint that
does not say (Hugging Face T5, Mesh TF, t5x); the registry checks the name when a loader is asked
for. `t5rank.checkpoints` imports nothing from `t5rank.models`: each family's loader, beside its
model, imports the readers here (`t5rank.models.loading`; T5's weights:
`t5rank.models.t5_weights`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional, Union

from t5rank.checkpoints import native
from t5rank.checkpoints.formats import detect_format
from t5rank.checkpoints.locate import local_path

# beside the weights of a checkpoint in a format with no room for them (Hugging Face): how to score
# it; `t5rank convert` writes it
RERANKER_CONFIG = "t5rank.json"
HF_CONFIG = "config.json"
T5_EXTRA_IDS = 100  # the sentinel pieces T5's embedding holds past its SentencePiece model's


@dataclasses.dataclass(frozen=True)
class Checkpoint:
  """A checkpoint as `resolve` read it (module docstring). The dicts are as read, not to be
  changed."""
  name: str                # what the user gave: a path, `shipped:NAME` or a Hub id
  path: str                # the local file or directory
  format: str              # one of `t5rank.checkpoints.FORMATS`
  metadata: dict           # a t5rank checkpoint's metadata.json ({} for other formats or none)
  digests: dict            # the size and sha256 of the files read here (metadata.json), for the
                           # manifest check (`t5rank.checkpoints.native.check_files`)
  beside: dict             # `t5rank.json` beside Hugging Face weights ({} when none)
  hf_config: dict          # a Hugging Face directory's config.json ({} for other formats)
  family: str              # the model family (module docstring)
  family_stated: bool      # whether the checkpoint's own files name its family

  @property
  def vocabulary(self) -> Optional[str]:
    """The SentencePiece model the checkpoint carries (its metadata's `vocabulary`; in another
    format's directory, a `spiece.model`), or None."""
    if self.format == "native":
      name = self.metadata.get("vocabulary")
      return os.path.join(self.path, name) if name else None
    spiece = os.path.join(self.path, "spiece.model")
    return spiece if os.path.isfile(spiece) else None

  @property
  def vocabulary_extra_ids(self) -> Optional[int]:
    """The extra ids of `vocabulary` as the metadata says; T5's 100 for a Hugging Face
    `spiece.model` (the loader bounds them by the embedding's size); None without a vocabulary."""
    if self.format == "native":
      return self.metadata.get("vocabulary_extra_ids")
    return T5_EXTRA_IDS if self.vocabulary is not None else None

  @property
  def target_words(self) -> Any:
    """The target words as stored (a registry name or a [positive, negative] list): the metadata's
    `target_words`; beside Hugging Face weights `t5rank.json`'s, else `yes_no` for an mT5
    (`model_type` mt5: the mT5 rerankers' words) and `true_false` for others; None when a t5rank
    checkpoint names none."""
    if self.format == "native":
      return self.metadata.get("target_words")
    if self.beside.get("target_words"):
      return self.beside["target_words"]
    return "yes_no" if self.hf_config.get("model_type") == "mt5" else "true_false"

  @property
  def max_length(self) -> Optional[int]:
    """The input length it was trained with (metadata `feature_lengths.inputs`, `t5rank.json`
    `max_length`), or None."""
    if self.format == "native":
      return self.metadata.get("feature_lengths", {}).get("inputs")
    return self.beside.get("max_length")

  @property
  def bm25_in_input(self) -> Optional[bool]:
    """Whether it reads each candidate's first-stage score in its input, as stored (None: not
    said)."""
    return (self.metadata if self.format == "native" else self.beside).get("bm25_in_input")

  def check_family(self, family: Optional[str]) -> None:
    """Raises ValueError when `family` (`--reranker`) contradicts the family the checkpoint's own
    files state."""
    if family and self.family_stated and self.family != family:
      raise ValueError(f"{self.path} is a {self.family} checkpoint (its files say so); "
                       f"--reranker {family} is only for checkpoints that do not say what they are "
                       "(e.g. a Hugging Face duoT5)")

  def as_family(self, family: Optional[str]) -> "Checkpoint":
    """This checkpoint read as `family` (`--reranker`: what it is when its files do not say; None:
    as they say), checked once (`check_family`): the value a loader takes without checking again
    (`t5rank.models.loading.load_reranker`)."""
    if not family:
      return self
    self.check_family(family)
    return dataclasses.replace(self, family=family)


def resolve(name: Union[str, Checkpoint]) -> Checkpoint:
  """The `Checkpoint` that `name` (a path, `shipped:NAME` or a Hub id; a `Checkpoint` is returned
  as it is) denotes, its small files read once (module docstring). Raises FileNotFoundError when
  it holds no checkpoint t5rank reads, ValueError (one line) when a name or a file cannot be read."""
  if isinstance(name, Checkpoint):
    return name
  path = local_path(name)
  kind = detect_format(path)
  metadata, digests, beside, hf_config = {}, {}, {}, {}
  if kind == "native":
    metadata, digests = native.read_metadata_file(path)
    # the trainer's checkpoints (a task_name) state monoT5 by saying no other; one converted by an
    # earlier t5rank from a Hugging Face duoT5 may say nothing
    stated = "model" in metadata or "task_name" in metadata
    family = metadata.get("model", native.DEFAULT_FAMILY)
  else:
    if os.path.isdir(path):
      beside = _json_object(os.path.join(path, RERANKER_CONFIG), required=False)
    if kind == "hf":
      hf_config = _json_object(os.path.join(path, HF_CONFIG), required=True)
    stated = "model" in beside
    family = beside.get("model", native.DEFAULT_FAMILY)
  return Checkpoint(name=name, path=path, format=kind, metadata=metadata, digests=digests,
                    beside=beside,
                    hf_config=hf_config, family=family, family_stated=stated)


def _json_object(path: str, *, required: bool) -> dict:
  """The JSON object in file `path` ({} when it is absent and not `required`); ValueError naming the
  file otherwise."""
  if not required and not os.path.isfile(path):
    return {}
  with open(path, encoding="utf-8") as f:
    try:
      value = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not JSON ({e})") from None
  if not isinstance(value, dict):
    raise ValueError(f"{path}: expected a JSON object such as "
                     '{"target_words": ["yes", "no"]}' if path.endswith(RERANKER_CONFIG)
                     else f"{path}: expected a JSON object")
  return value
