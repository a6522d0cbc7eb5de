"""Rerankers from checkpoints: the one front door from a checkpoint to its family's `Reranker`.

    reranker, params = load_reranker("shipped:monot5")   # a path, shipped:NAME, a Hub id, or a
                                                         # `t5rank.checkpoints.resolved.Checkpoint`

The checkpoint is resolved once (`t5rank.checkpoints.resolved.resolve`: local directory, format,
metadata, family); the family its files name (a t5rank checkpoint's metadata.json `model`, a Hugging
Face directory's `t5rank.json`; monoT5 when they name none), or `model` (`--reranker`) for one whose
files do not say, picks the loader that family registered beside its model
(`t5rank.models.registry.Family.loader`: `load_monot5` in `t5rank.models.monot5`, `load_tk` in
`t5rank.models.tk_reranker`, ...). Each loader reads its own files (the weights, a vocabulary or word
list) through `t5rank.checkpoints` (T5's weights through `t5rank.models.t5_weights`) and builds
its `Reranker`; options a family does not have are refused by name.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from t5rank.checkpoints.resolved import Checkpoint, resolve
from t5rank.models import registry
from t5rank.models.reranker import Reranker


def load_reranker(checkpoint: Union[str, Checkpoint], *, config_name: Optional[str] = None,
                  options: Optional[Mapping[str, Any]] = None,
                  model: Optional[str] = None) -> tuple[Reranker, Any]:
  """(reranker, parameters) of `checkpoint` (any format `t5rank.models.t5_weights.load_checkpoint`
  reads; a name is resolved here, a resolved `Checkpoint` is read no further than its weights) by
  the loader of its family, or of `model` (`--reranker`: what a checkpoint is when its files do not
  say, e.g. a Hugging Face duoT5; refused when they say otherwise; a `Checkpoint` already read as
  its family, `Checkpoint.as_family`, needs none). `options` are the family's own
  overrides (for monoT5: vocab, targets, dtype, max_length, bm25_in_input), None values meaning
  "as stored"; `config_name` is for formats without a config (Mesh TF, t5x)."""
  checkpoint = resolve(checkpoint).as_family(model)
  family = registry.get(checkpoint.family)
  options = {k: v for k, v in (options or {}).items() if v is not None}
  if config_name is not None:
    options["config_name"] = config_name
  return family.loader(checkpoint, **options)


def refuse_options(checkpoint: Checkpoint, family: str, options: Mapping[str, Any],
                   why: str) -> None:
  """Raises ValueError naming `options` when there are any: a `family` checkpoint has none of them
  (`why` says what it has instead)."""
  if options:
    raise ValueError(f"{checkpoint.path} is a {family} checkpoint; the options "
                     f"{', '.join(sorted(options))} are not its own ({why})")
