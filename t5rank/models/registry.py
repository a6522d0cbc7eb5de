"""The one registry of model families: every part of t5rank finds a model here, by name.

A family registers once, at the end of its own module (`register(Family(...))`):

    name        the `model` of its checkpoints' metadata.json ("monot5", "tk", "dual_encoder", ...):
                what the family is called everywhere, never inferred from its config class
    config      its config class (JSON round trip, the trainer's `model_config`)
    reranker    its `Reranker` class, which states what it can do (`Reranker.log_probability`, its
                scoring `job`): `t5rank score`, training-time evaluation, the cascade, the service
    trainable   its `Trainable` (`t5rank.training`), by dotted name
    loader      the function that builds its `Reranker` and parameters from a resolved checkpoint
                (`t5rank.checkpoints.resolved.Checkpoint`), defined beside the model and reading
                the weights through `t5rank.checkpoints` (`t5rank.models.loading.load_reranker`)
    encoder     where it has one, the function that makes its `TextEncoder` for dense retrieval
                (`t5rank.retrieval.encoders`), by dotted name
    explain     where it has one, `t5rank explain`'s function (reranker, params, query,
                [(docid, text)], html path, png path) -> lines to print, by dotted name

The parts that live above `t5rank.models` (training, retrieval) are named by their dotted path and
imported when asked for (`Family.part`), so that `t5rank.models` imports nothing above it and no
package imports in a circle; the loader is the function itself.

Families are found without a list kept by hand, on the first lookup: every module of
`t5rank.models` that calls `register`, every module an installed package names in the entry-point
group `t5rank.models` (a model outside t5rank: `entry_points={"t5rank.models": ["mine =
mypackage.mymodel"]}` in its setup), and the modules named in the environment variable
`T5RANK_MODELS` (comma-separated; for a model that is not installed). docs/adding_a_model.md walks
through adding one.

    from t5rank.models import registry
    registry.get("tk").reranker                 # the TK class
    registry.names()                            # every family's name: `--reranker`'s choices
    registry.for_config(config, "duot5").part("trainable")  # its Trainable class
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import os
import pkgutil
from typing import Any, Callable, Optional

from t5rank.checkpoints.native import DEFAULT_FAMILY

ENTRY_POINTS = "t5rank.models"  # the entry-point group of models outside t5rank
ENVIRONMENT = "T5RANK_MODELS"  # modules to import for their models, comma-separated


@dataclasses.dataclass(frozen=True)
class Family:
  """One model family (module docstring)."""
  name: str
  config: type
  reranker: type
  loader: Callable[..., Any]
  trainable: Optional[str] = None
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


_LOADED: list[bool] = []


def _own_modules() -> list[str]:
  """The modules of `t5rank.models` that register a family: those whose source calls `register`
  (read as text, so that modules registering nothing are not imported)."""
  package = os.path.dirname(__file__)
  modules = []
  for info in pkgutil.iter_modules([package]):
    path = os.path.join(package, info.name + ".py")
    if not info.ispkg and info.name != "registry" and os.path.isfile(path):
      with open(path, encoding="utf-8") as f:
        if "registry.register(" in f.read():
          modules.append(f"t5rank.models.{info.name}")
  return sorted(modules)


def _load() -> None:
  """Imports every module that registers a family (module docstring), once."""
  if _LOADED:
    return
  _LOADED.append(True)
  for module in _own_modules():
    importlib.import_module(module)
  for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
    entry.load()
  for module in filter(None, (m.strip() for m in os.environ.get(ENVIRONMENT, "").split(","))):
    try:
      importlib.import_module(module)
    except ImportError as e:
      raise ValueError(f"{ENVIRONMENT} names {module!r}, which cannot be imported ({e})") from None


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


def for_config(config: Any, name: Optional[str] = None) -> Family:
  """The family of a model `config` being trained or evaluated: the one named `name` (its config
  class must be `config`'s), else the only family with that config class, else (a class several
  families share, as T5Config: monoT5, duoT5) the default family, `DEFAULT_FAMILY`, when it is
  among them; ValueError naming the choices otherwise."""
  _load()
  if name is not None:
    family = get(name)
    if type(config) is not family.config:
      raise ValueError(f"a {name} model has a {family.config.__name__}, not a "
                       f"{type(config).__name__}")
    return family
  matching = [f for f in _FAMILIES.values() if type(config) is f.config]
  if len(matching) == 1:
    return matching[0]
  for family in matching:
    if family.name == DEFAULT_FAMILY:
      return family
  if not matching:
    raise TypeError(f"no model family has the config {type(config).__name__}; t5rank knows "
                    f"{', '.join(f.config.__name__ for f in _FAMILIES.values())}")
  raise ValueError(f"the families {', '.join(f.name for f in matching)} share "
                   f"{type(config).__name__}: name the one to train")


class Families:
  """argparse `choices` of a `--reranker` flag: the names of `t5rank.models.registry`'s families
  (`t5_weights`: only those whose checkpoints are T5 weights, config T5Config), looked up when the
  flag is parsed or its help shown, so that building the parser imports no model. Give the flag a
  `metavar` (argparse lists plain choices while building the parser) and `%(choices)s` in its
  help."""

  def __init__(self, *, t5_weights: bool = False):
    self.t5_weights = t5_weights

  def names(self) -> list[str]:
    from t5rank.models.config import T5Config

    return [f.name for f in sorted(families(), key=lambda f: f.name)
            if not self.t5_weights or f.config is T5Config]

  def __iter__(self):
    return iter(self.names())

  def __contains__(self, name) -> bool:
    return name in self.names()
