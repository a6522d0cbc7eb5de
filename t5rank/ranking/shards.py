"""The scorer's resumable output: one file per shard of pairs, a manifest, and the merged run.

    OUT.shards/manifest.json           fingerprint of the job, number of shards and of pairs
    OUT.shards/shard-00003-of-00012.tsv  `qid docid window score p` per pair and a sha256 line,
                                       written atomically; checked before it is trusted
A rerun with the same fingerprint scores only the missing shards; when all exist, the job ranks
each query's candidates from the rows (`t5rank.ranking.jobs`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Iterable, Mapping, Sequence

import numpy as np

from t5rank.data.readers import Run
from t5rank.files import atomic_write
from t5rank.ranking.candidates import Pair
from t5rank.reuse import OtherJobError, changed, resume_directory

MANIFEST_FILE = "manifest.json"


def shard_path(directory: str, index: int, count: int) -> str:
  """The file of shard `index` of `count` in `directory`."""
  return os.path.join(directory, f"shard-{index:05d}-of-{count:05d}.tsv")


def write_shard(path: str, pairs: Sequence[Pair], log_p: np.ndarray, p: np.ndarray) -> None:
  """Writes one shard's scores, `qid docid window log_p p` per line, and a last line `# sha256 HEX`
  of the lines before it, atomically."""
  lines = [f"{pair.qid}\t{pair.docid}\t{pair.part}\t{lp!r}\t{pp!r}\n"
           for pair, lp, pp in zip(pairs, log_p.tolist(), p.tolist())]
  body = "".join(lines)
  with atomic_write(path) as f:
    f.write(body + f"{CHECKSUM_PREFIX}{hashlib.sha256(body.encode()).hexdigest()}\n")


CHECKSUM_PREFIX = "# sha256 "


class ShardError(RuntimeError):
  """A shard file that does not hold the scores of its pairs (emptied, cut, or edited)."""


def read_shard(path: str, pairs: Sequence[Pair]) -> list[tuple[Pair, float, float]]:
  """The (pair, log P, P) rows of a shard written by `write_shard`, after checking that they are
  exactly `pairs`, in order, with finite scores; ShardError otherwise, saying how to start over."""
  with open(path, encoding="utf-8") as f:
    text = f.read()
  body, _, last = text.rstrip("\n").rpartition("\n")
  body = body + "\n" if body else ""
  if not last.startswith(CHECKSUM_PREFIX) or (
      last[len(CHECKSUM_PREFIX):] != hashlib.sha256(body.encode()).hexdigest()):
    raise ShardError(f"{path}: its checksum line is missing or does not match its rows (emptied, "
                     f"cut or edited); {_START_OVER}")
  lines = body.splitlines()
  rows = []
  wrong = None  # the first line whose pair is not the shard's
  try:
    for i, line in enumerate(lines):
      qid, docid, window, lp, pp = line.split("\t")
      row = (qid, docid, int(window))
      pair = pairs[i] if i < len(pairs) else None
      if wrong is None and pair is not None and row != pair:
        wrong = i, row
      rows.append((pair, float(lp), float(pp)))  # the shard's own Pair: the same values
  except ValueError as e:
    raise ShardError(f"{path}:{len(rows) + 1}: not a shard line ({e}); {_START_OVER}") from None
  if len(rows) != len(pairs):
    raise ShardError(f"{path} holds {len(rows)} rows, not the {len(pairs)} pairs of this shard "
                     f"(emptied or cut); {_START_OVER}")
  if wrong is not None:
    raise ShardError(f"{path}:{wrong[0] + 1}: {wrong[1]} where this shard has "
                     f"{tuple(pairs[wrong[0]])}; {_START_OVER}")
  if not all(math.isfinite(row[1]) for row in rows):
    raise ShardError(f"{path} holds non-finite scores; {_START_OVER}")
  return rows


_START_OVER = ("delete that file to score its pairs again, or the whole .shards directory to "
               "start over")


def check_shard(path: str, pairs: Sequence[Pair]) -> bool:
  """Whether the shard at `path` exists (and then is valid: `read_shard` raises ShardError when not),
  so a resumed job trusts no emptied or cut shard."""
  if not os.path.exists(path):
    return False
  read_shard(path, pairs)
  return True


def fingerprint(pairs: Sequence[Pair], queries: Mapping[str, str],
                passages: Mapping[str, Sequence[str]], settings: Mapping) -> str:
  """A hash of everything that decides the shards' contents, to refuse resuming a different job."""
  h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
  for pair in pairs:
    h.update(f"{pair.qid}\t{pair.docid}\t{pair.part}\n".encode())
  for qid in dict.fromkeys(p.qid for p in pairs):
    h.update(f"{qid}\t{queries[qid]}\n".encode())
  for docid, texts in passages.items():
    h.update(json.dumps([docid, texts]).encode())
  return h.hexdigest()


def open_shard_directory(directory: str, manifest: Mapping, replace: bool = False) -> None:
  """Creates `directory` with `manifest`, or checks that the manifest it holds is the same job's
  (`t5rank.reuse.resume_directory`: a directory of resumable parts); ShardError names the
  settings that differ (`manifest["settings"]`). With `replace` (a job's own work directory,
  where an earlier job's shards are stale) another job's shards are moved aside."""
  def describe(found) -> str:
    before = found.get("settings", {}) if isinstance(found, dict) else {}
    differ = changed(before, manifest.get("settings", {}))
    return (f"different {', '.join(differ)}" if differ
            else "other candidates or texts" if before else "other inputs, model or options")

  try:
    resume_directory(directory, manifest, manifest_file=MANIFEST_FILE, what="the shards",
                     replace=replace, describe=describe)
  except OtherJobError as e:
    raise ShardError(str(e)) from None
