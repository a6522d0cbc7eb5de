"""`t5rank ensemble`: one TK checkpoint from several trained instances (the TK paper's TUW19-p3).

    t5rank ensemble --output runs/tk_ensemble runs/tk_s0/best runs/tk_s1/best runs/tk_s2/best

The instances must share the architecture and the word list (e.g. the same gin with other seeds).
The ensemble's parameters are theirs stacked on a leading axis; `t5rank score` contextualizes each
query and document once per member and scores a pair by the members' mean score.
"""

from __future__ import annotations

import argparse

from t5rank.commands import add_overwrite


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("ensemble", help="combine TK checkpoints into one that scores by their "
                            "mean (TUW19-p3)", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("checkpoints", nargs="+", help="two or more TK checkpoints")
  p.add_argument("-o", "--output", required=True, help="the checkpoint directory to write (new)")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`: --output may replace (with --overwrite)
  an ensemble this command wrote."""
  from t5rank.checkpoints.locate import local_path
  from t5rank.files import DIRECTORY, Output

  return ([Output("--output", args.output, DIRECTORY, _is_ensemble)],
          {f"CHECKPOINT {i + 1}": local_path(path) for i, path in enumerate(args.checkpoints)})


def _is_ensemble(path: str) -> bool:
  from t5rank.checkpoints import native
  return native.is_native_checkpoint(path) and "members" in native.read_metadata(path)


def build_ensemble(checkpoints: list[str], output: str) -> None:
  """Writes the ensemble of the TK `checkpoints` to `output`."""
  import os

  import jax
  import numpy as np

  from t5rank.checkpoints import native
  from t5rank.files import atomic_directory
  from t5rank.models.tk_reranker import TK, load_tk
  from t5rank.models.words import WORDS_FILE

  if len(checkpoints) < 2:
    raise ValueError("an ensemble needs at least two checkpoints")
  members = []
  for path in checkpoints:
    reranker, params = load_tk(path)
    if reranker.config.ensemble != 1:
      raise ValueError(f"{path} is already an ensemble; give its members")
    members.append((path, reranker, params))
  first = members[0][1]
  for path, reranker, _ in members[1:]:
    if reranker.config != first.config:
      raise ValueError(f"{path} has another architecture or word list than {members[0][0]}")
  stacked = jax.tree.map(lambda *x: np.stack([np.asarray(a) for a in x]),
                         *[params for _, _, params in members])
  with atomic_directory(output, owner="ensemble") as directory:
    first.vocabulary.save(os.path.join(directory, WORDS_FILE))
    native.save_checkpoint(directory, stacked, first.config.replace(ensemble=len(members)),
                           {"model": TK.name, "members": [os.path.abspath(p) for p in checkpoints]})


def run(args: argparse.Namespace) -> int:
  try:
    build_ensemble(args.checkpoints, args.output)
  except (ValueError, FileNotFoundError) as e:
    raise SystemExit(f"t5rank ensemble: {e}") from None
  print(f"wrote {args.output}: an ensemble of {len(args.checkpoints)} TK instances")
  return 0
