"""What a cascade is asked to run (`t5rank rerank`, `t5rank.pipelines.cascade`): its reranker
stages as given (`parse_stage`: `[NAME=]CHECKPOINT[@DEPTH]`), checked against their checkpoints
before any work (`check_stages`: each resolved once, `CheckedStage`), and the fusion weights an
earlier cascade tuned (`read_fusion_weights`)."""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Mapping, Optional, Sequence

from t5rank.checkpoints.locate import is_hub_id
from t5rank.checkpoints.resolved import Checkpoint
from t5rank.files import read_json
from t5rank.ranking import fusion


@dataclasses.dataclass(frozen=True)
class RerankStage:
  """A reranker stage: `checkpoint` (any format t5rank loads; `reranker` names its model family
  when its files do not), reranking the top `depth` (None: all) of the stage before; `name` labels
  its run (default: the model family's name); `fuse`: its ranking fused with the stages before it
  (`t5rank.pipelines.cascade`'s docstring)."""
  checkpoint: str
  depth: Optional[int] = None
  name: str = ""
  reranker: Optional[str] = None
  fuse: bool = False


def parse_stage(text: str) -> RerankStage:
  """A stage from `[NAME=]CHECKPOINT[@DEPTH]`, e.g. `monot5=runs/demo/model/final@100`: NAME is a
  word (letters, digits, _) before the first `=`, DEPTH a positive number (digits 0-9) after the
  last `@`. A checkpoint whose path holds an `@` (or a Hub id's `@REVISION`) is given as it is
  when what follows its last `@` is no number: `ORG/NAME@REVISION@DEPTH` for both."""
  name, sep, rest = text.partition("=")
  if not sep or not name.replace("_", "").isalnum():
    name, rest = "", text
  checkpoint, sep, depth = rest.rpartition("@")
  if not sep:
    checkpoint, depth = rest, ""
  elif not re.fullmatch(r"[0-9]+", depth):
    if os.path.exists(rest) or is_hub_id(rest):  # a path with an `@`, or a Hub id's @REVISION
      checkpoint, depth = rest, ""
    else:
      raise ValueError(f"a stage is [NAME=]CHECKPOINT[@DEPTH] with DEPTH a positive number of "
                       f"candidates, got {text!r}" + (" (nothing after its @; leave the @ out "
                                                      "to rerank all)" if not depth else ""))
  if not checkpoint:
    raise ValueError(f"a stage is [NAME=]CHECKPOINT[@DEPTH], got {text!r}")
  if depth and int(depth) < 1:
    raise ValueError(f"a stage's depth is a positive number of candidates, got {text!r}")
  return RerankStage(checkpoint=checkpoint, depth=int(depth) if depth else None, name=name)


@dataclasses.dataclass(frozen=True)
class CheckedStage:
  """A stage as `check_stages` checked it: its `spec`, its checkpoint resolved once and read as
  its family (`t5rank.checkpoints.resolved.Checkpoint.as_family`: what the stage loads), and its
  `name` (the spec's, else the family's)."""
  spec: RerankStage
  checkpoint: Checkpoint
  name: str


def check_stages(stages: Sequence[RerankStage], first_name: str) -> list[CheckedStage]:
  """The stages checked before any work against what their files say: each checkpoint exists in a
  format t5rank reads (resolved here, once), its family agrees with the stage's `reranker`, no two
  stages share a name, and no model that reads BM25 scores follows a dense first stage (named
  `first_name`). Raises ValueError (FileNotFoundError for a missing checkpoint) naming the
  stage."""
  from t5rank.checkpoints.resolved import resolve

  checked: list[CheckedStage] = []
  for i, spec in enumerate(stages, 1):
    try:
      checkpoint = resolve(spec.checkpoint).as_family(spec.reranker)
    except (ValueError, FileNotFoundError) as e:
      raise type(e)(f"stage {i} ({spec.checkpoint}): {e}") from None
    name = spec.name or checkpoint.family
    if name in [c.name for c in checked] or name == first_name:
      raise ValueError(f"stage {i} ({spec.checkpoint}) is named {name!r}, as a stage before it; "
                       "give each stage its own NAME= (e.g. --stage mono2=CHECKPOINT@K)")
    if first_name == "dense" and checkpoint.bm25_in_input:
      raise ValueError(f"stage {i} ({spec.checkpoint}) reads each candidate's BM25 score, but "
                       "the first stage is dense retrieval: start the cascade with BM25 (or its "
                       "run)")
    checked.append(CheckedStage(spec, checkpoint, name))
  return checked



@dataclasses.dataclass(frozen=True)
class FusionSource:
  """Where a fusing stage's weights come from: tuned on `qrels` (the cascade's own judged queries)
  or read from `weights` ({fused row's name: {"runs": names, "weights": numbers}}, an earlier
  cascade's results.json "fusion")."""
  qrels: Optional[Mapping[str, Mapping[str, int]]] = None
  weights: Optional[Mapping[str, Mapping]] = None
  described: str = ""


def read_fusion_weights(path: str) -> FusionSource:
  """The tuned fusion weights of an earlier cascade's results.json (`t5rank rerank --tune-fusion`
  on validation queries)."""
  try:
    results = read_json(path)
  except ValueError as e:
    raise ValueError(f"{e}; give the results.json of `t5rank rerank --tune-fusion`") from None
  if results is None:
    raise ValueError(f"{path}: no such file (the results.json of `t5rank rerank --tune-fusion`)")
  weights = results.get("fusion") if isinstance(results, dict) else None
  if isinstance(weights, dict) and isinstance(weights.get("weights"), dict):
    weights = weights["weights"]  # a `t5rank demo` results.json: its test cascade's weights
  if not isinstance(weights, dict) or not weights:
    raise ValueError(f"{path}: holds no tuned fusion weights (\"fusion\"); it must be the "
                     "results.json of `t5rank rerank --tune-fusion` with the same stages")
  for row, entry in weights.items():
    runs = entry.get("runs") if isinstance(entry, dict) else None
    numbers = entry.get("weights") if isinstance(entry, dict) else None
    if not (isinstance(runs, list) and all(isinstance(r, str) for r in runs)
            and isinstance(numbers, list) and len(numbers) == len(runs)
            and all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in numbers)):
      raise ValueError(f"{path}: the fusion weights of {row!r} are not a list of runs with one "
                       f"number each (\"runs\": [...], \"weights\": [...]); got {entry!r:.80}")
    try:
      fusion.check_weights(numbers, len(runs))
    except ValueError as e:
      raise ValueError(f"{path}: {row!r}: {e}") from None
  return FusionSource(weights=weights, described=f"weights from {path}")
