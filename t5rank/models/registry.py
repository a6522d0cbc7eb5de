"""The one registry of model families: every part of t5rank finds a model here, by name or config.

A family registers once, at the end of its own module (`register(Family(...))`):

    name        the `model` of its checkpoints' metadata.json ("monot5", "tk", "dual_encoder", ...)
    config      its config class (JSON round trip, the trainer's `model_config`)
    reranker    its `Reranker` class (`t5rank score`, training-time evaluation, the cascade)
    trainable   its `Trainable` (`t5rank.training`), by dotted name
    loader      the function that builds its `Reranker` and parameters from a resolved checkpoint
                (`t5rank.checkpoints.resolved.Checkpoint`), defined beside the model and reading
                the weights through `t5rank.checkpoints` (`t5rank.models.loading.load_reranker`)
    encoder     where it has one, the function that makes its `TextEncoder` for dense retrieval
                (`t5rank.retrieval.encoders`), by dotted name
    explain     where it has one, the function that explains its scores (`t5rank explain`)

The parts that live above `t5rank.models` (training, retrieval) are named by their dotted path and
imported when asked for (`Family.part`), so that `t5rank.models` imports nothing above it and no
package imports in a circle; the loader is the function itself (`t5rank.checkpoints`, which reads
the files, lies below `t5rank.models` and imports nothing from it; T5's weights in each format are
`t5rank.models.t5_weights`, beside the network). Adding a model is its module, its
`register` call and its module's name in MODULES.

    from t5rank.models import registry
    registry.get("tk").reranker                 # the TK class
    registry.names()                            # every family's name: `--reranker`'s choices
    registry.of_config(config).part("trainable")  # its Trainable class
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Optional

# the modules that register a family; imported on the first lookup
MODULES = ("t5rank.models.monot5", "t5rank.models.duot5", "t5rank.models.tk_reranker",
           "t5rank.models.dual_encoder", "t5rank.models.classifier")
DEFAULT = "monot5"  # the family of a checkpoint whose metadata names none (every HF, Mesh TF, t5x)


@dataclasses.dataclass(frozen=True)
class Family:
  """One model family (module docstring)."""
  name: str
  config: type
  reranker: type
  trainable: str
  loader: Callable[..., Any]
  encoder: Optional[str] = None
  explain: Optional[str] = None
  description: str = ""

  def part(self, field: str) -> Callable[..., Any]:
    """The object a dotted-name field names (trainable, encoder, explain); ValueError when this
    family has none."""
    dotted = getattr(self, field)
    if dotted is None:
      raise ValueError(f"a {self.name} model has no {field}")
    module, _, attribute = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


_FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
  """Adds `family`; a second family of the same name is an error (two modules claim one name)."""
  if family.name in _FAMILIES and _FAMILIES[family.name] != family:
    raise ValueError(f"two model families are named {family.name!r}")
  _FAMILIES[family.name] = family
  return family


def _load() -> None:
  for module in MODULES:
    importlib.import_module(module)


def families() -> list[Family]:
  """Every registered family, in registration order."""
  _load()
  return list(_FAMILIES.values())


def names() -> list[str]:
  """Every registered family's name, sorted (the choices of a command's `--reranker`)."""
  return sorted(family.name for family in families())


def get(name: str) -> Family:
  """The family named `name`; ValueError naming the known ones otherwise."""
  _load()
  if name not in _FAMILIES:
    raise ValueError(f"unknown model {name!r}; t5rank knows {sorted(_FAMILIES)}")
  return _FAMILIES[name]


def of_config(config: Any) -> Family:
  """The family whose config class `config` is (the first registered, for a class two families
  share: monoT5's and duoT5's T5Config trains as monoT5's)."""
  _load()
  for family in _FAMILIES.values():
    if type(config) is family.config:
      return family
  raise TypeError(f"no model family has the config {type(config).__name__}; t5rank knows "
                  f"{', '.join(f.config.__name__ for f in _FAMILIES.values())}")
