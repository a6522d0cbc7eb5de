"""Keyed reuse: every output t5rank keeps to reuse later is kept with the key of what made it (its
inputs' fingerprints, as JSON), so that the same command run again reuses it, resumes it, or makes
it anew, and never reuses an output made from something else. One policy per kind of artifact
(docs/guarantees.md states them for users):

- **A file** (a stage's run, a teacher's scores): `cached(path, key, build)`. Its stamp, PATH.json,
  holds the key and the file's size and sha256. Reused when both match; otherwise made anew (the
  stamp removed first, written again after the file is whole).
- **A directory made whole** (the BM25 index, word embeddings, a trained model's directory, a
  teacher directory): `cached(path, key, build, complete=...)`. The same key and `complete`:
  reused; the same key, unfinished: resumed; another key, or damaged: moved aside to PATH.previous
  (nothing is deleted) and made anew.
- **A directory of resumable parts** (the scorer's shards, the dense index's shards, a training
  run's checkpoints): `resume_directory(path, key)`. Created with the key in its manifest, or
  resumed when the manifest holds the same key (each part is then checked as it is read);
  another key is refused, naming what differs (`changed`), unless the directory is the job's own
  work (`replace`), when it is moved aside.

    reused = cached(path, key, build, what="the run")
    resume_directory(directory, manifest, manifest_file="manifest.json", what="shards")

The details of `cached`:
- a file (`complete` None): its stamp, PATH.json, holds the key and the file's own size and
  sha256 (OUTPUT_DIGEST). The file is reused when it is there with a stamp holding the key and
  its digest: a file emptied, cut or edited since is made anew (a line says why). Otherwise the
  stamp is removed, `build()` writes the file (resuming from partial state it keys itself, e.g. a
  scorer's shards) and the stamp is written after it (atomically): a kill at any point never
  leaves an output beside a stamp not its own.
- a directory (`complete` given; `stamp` a file inside it, by default stage.json): the key is
  recorded in the stamp before the build writes anything else (by the cache, or by the build
  itself with `records_key`, as a trainer records recipe.json once it has checked MODEL_DIR, or as
  the BM25 index writes its key with the index), and `complete(path)` says whether a build
  finished there (it raises ValueError when what is there is damaged).

The stamp matches when it holds every entry of the key (it may hold more, e.g. recipe.json's gin
text beside its hash). A directory's stamp holds no digest of its files: its `complete` checks
what it needs (a teacher directory's scores against teacher.json's hash; a checkpoint's files
against its manifest whenever it is loaded). A stamp that is not JSON is refused, naming it.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping, Optional

from t5rank.files import atomic_write, move_aside, read_json, sha256_file


DIRECTORY_STAMP = "stage.json"  # a directory's stamp unless its stage names another
OUTPUT_DIGEST = "output_file"  # in a file's stamp: {"bytes": its size, "sha256": its hash}


def _digest(path: str) -> dict:
  return {"bytes": os.path.getsize(path), "sha256": sha256_file(path)}


def _matches(saved: Optional[dict], key: Mapping[str, Any]) -> bool:
  return isinstance(saved, dict) and all(saved.get(k) == v for k, v in key.items())


def changed(saved: Any, key: Mapping[str, Any]) -> list[str]:
  """The names whose values differ between a saved key and `key` (either side's names; a saved
  key that is not a mapping differs in all of `key`'s)."""
  saved = saved if isinstance(saved, Mapping) else {}
  key = json.loads(json.dumps(key))
  return sorted(name for name in saved.keys() | key.keys() if saved.get(name) != key.get(name))


def cached(path: str, key: Mapping[str, Any], build: Callable[[], Any], *, what: str,
           rebuild: bool = False, complete: Optional[Callable[[str], bool]] = None,
           stamp: Optional[str] = None, records_key: bool = False) -> bool:
  """Makes `path` with `build()` unless it can be reused (module docstring); returns whether it
  was reused. `key`: what the output is made from (JSON values); `what` names it in the lines
  printed; `rebuild`: made anew even when it could be reused; `complete` makes it a directory's
  cache; `stamp`: where the key is kept (default PATH.json for a file, PATH/stage.json for a
  directory); `records_key`: the build writes the stamp itself, first."""
  key = json.loads(json.dumps(key))  # as it reads back (tuples are lists)
  stamp = stamp or (path + ".json" if complete is None else os.path.join(path, DIRECTORY_STAMP))
  try:
    saved = read_json(stamp)
  except ValueError as e:  # not written by t5rank (its stamps are written whole): said, not guessed
    raise ValueError(f"{e}; it is the stamp of {what}: remove it to make {what} anew") from None
  same = _matches(saved, key)
  if complete is None:
    if same and not rebuild and os.path.isfile(path):
      if saved.get(OUTPUT_DIGEST) == _digest(path):
        return True
      print(f"{path} is not the file its stamp {os.path.basename(stamp)} records (" + (
          "which records none: an earlier t5rank's" if OUTPUT_DIGEST not in saved
          else "emptied, cut or edited since") + f"); making {what} anew", flush=True)
    if os.path.exists(stamp):  # gone before the output is rewritten, back after it is whole
      os.remove(stamp)
    build()
    with atomic_write(stamp) as f:
      json.dump({**key, OUTPUT_DIGEST: _digest(path)}, f, indent=1)
    return False
  problem = None
  if same and not rebuild:
    try:
      if complete(path):
        print(f"using {what} in {path} (made from the same inputs)", flush=True)
        return True
    except ValueError as e:  # damaged: made anew
      problem = str(e)
  if os.path.exists(path) and (rebuild or not same or problem):
    move_aside(path, ("rebuilt on request" if rebuild else problem if problem
                      else f"it holds no {os.path.basename(stamp)}" if saved is None
                      else "it was made from other inputs") + f"; making {what} anew")
  elif same:
    print(f"resuming the unfinished {what} in {path}", flush=True)
  if not records_key:
    os.makedirs(path, exist_ok=True)
    with atomic_write(stamp) as f:
      json.dump(key, f, indent=1)
  build()
  return False


class OtherJobError(ValueError):
  """A directory of resumable parts holds another job's (`resume_directory`)."""


def resume_directory(directory: str, key: Mapping[str, Any], *, manifest_file: str, what: str,
                     replace: bool = False,
                     describe: Optional[Callable[[Any], str]] = None) -> bool:
  """A directory of resumable parts keyed by `key` in `directory/manifest_file`: created with it
  (returns False), or resumed when the manifest holds the same key (returns True). Another key:
  OtherJobError naming what differs (`describe(saved)` says it where the key's names would not),
  or with `replace` (the job's own work directory, whose earlier parts are stale) the directory
  moved aside to DIRECTORY.previous and created anew. A manifest that is not JSON is refused,
  naming it (moved aside with `replace`)."""
  key = json.loads(json.dumps(key))
  path = os.path.join(directory, manifest_file)
  if os.path.exists(path):
    try:
      saved = read_json(path)
    except ValueError as e:
      if not replace:
        raise ValueError(f"{e}; remove {directory} to start over") from None
      saved = None
    if saved == key:
      return True
    if not replace:
      names = changed(saved, key)
      why = describe(saved) if describe else f"different {', '.join(names)}"
      raise OtherJobError(f"{directory} holds {what} of another job ({why}); remove it to start "
                          "over, or rerun the original command")
    move_aside(directory, f"it holds {what} of another job; starting over")
  os.makedirs(directory, exist_ok=True)
  with atomic_write(path) as f:
    json.dump(key, f, indent=2, sort_keys=True)
  return False
