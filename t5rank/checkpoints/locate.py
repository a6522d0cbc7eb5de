"""Where a checkpoint name becomes a local directory: the one place every command, the trainer and
the Python API turn what a user typed into a path.

    local_path("runs/model/final")   -> "runs/model/final"      a path: as it is
    local_path("shipped:monot5")     -> ".../t5rank/shipped/monot5"   a model t5rank ships

Commands resolve a name here before they check their outputs against their inputs, so that no
output can land inside a checkpoint given by name.
"""

from __future__ import annotations

from typing import Optional

from t5rank.checkpoints import shipped


def local_path(name: Optional[str]) -> Optional[str]:
  """The local path of checkpoint `name`: a shipped model's directory for `shipped:NAME` (an
  unknown name raises ValueError naming the shipped ones), anything else unchanged (None too)."""
  return shipped.resolve(name)
