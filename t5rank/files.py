"""A user's files are precious: how every t5rank command writes, and what it refuses to write.

    check_outputs(outputs, inputs, overwrite=...)   before any work: refuses an output that is,
        contains or lies inside an input (after resolving links), two outputs that overlap, an
        output file that exists (unless `overwrite`), and an output directory that holds files this
        command did not write (even with `overwrite`: t5rank never deletes a directory of yours)
    atomic_write(path)        a file: written under a temporary name, renamed when complete
    atomic_directory(path)    a set of files: written into a new directory, then swapped into place
                              in one rename (the old set, or the new, never a mix)
    writer_lock(path)         one writer at a time (atomic_directory's, a cascade's work
                              directory): a second is refused at once, naming the first's pid
    file_manifest / check_manifest   sizes and sha256 of the files of a checkpoint or an index,
                              recorded when it is written and checked before it is read

The kinds of output (`Output.kind`):
    FILE        may not exist (or `--overwrite`: replaced atomically)
    DIRECTORY   may not exist, or be empty, or hold this command's own earlier output (`owned`)
                and `--overwrite` is given
    WORK        a command's own resumable work (OUTPUT.shards, OUTPUT.partial, a training
                directory, a job's work directory): may exist when it is empty or `owned`, and is
                then continued; never a symbolic link

A directory a command makes carries its name in OWNER_FILE (`atomic_directory(path, owner=...)`,
`mark_owner`); `owned_by(command)` recognises it, so that no directory that merely looks like the
command's output (a user's model folder beside its own notes) is ever taken for it. A DIRECTORY
output given as a symbolic link stays the user's link: the new set of files replaces the
directory it points to.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import glob
import hashlib
import json
import os
import shutil
import tempfile
from typing import IO, Callable, Iterator, Mapping, Optional, Sequence

FILE, DIRECTORY, WORK = "file", "directory", "work"
OWNER_FILE = ".t5rank-output.json"  # {"command": the t5rank command that made the directory}
_TEMPORARY, _OLD, _LOCK = ".t5rank-tmp-", ".t5rank-old-", ".t5rank-lock"
# files of at most this size are hashed in a manifest; larger ones (parameter arrays) by size alone,
# and the scorer hashes the parameters it loads anyway
HASH_LIMIT = 64 * 2 ** 20


class OutputError(ValueError):
  """An output the command must not write; the message names the flag, the path and why."""


@dataclasses.dataclass(frozen=True)
class Output:
  """One path a command writes: `flag` names it in messages; `owned(path)` says whether an
  existing DIRECTORY or WORK path is this command's own output (None: only an empty one is)."""
  flag: str
  path: Optional[str]
  kind: str = FILE
  owned: Optional[Callable[[str], bool]] = None


def holds(*names: str) -> Callable[[str], bool]:
  """An `Output.owned` test: the directory holds one of `names` (files the command writes there)."""
  return lambda path: any(os.path.exists(os.path.join(path, name)) for name in names)


def owner(path: str) -> Optional[str]:
  """The command named by the OWNER_FILE of directory `path`, or None."""
  try:
    with open(os.path.join(path, OWNER_FILE), encoding="utf-8") as f:
      value = json.load(f)
  except (OSError, ValueError):
    return None
  return value.get("command") if isinstance(value, dict) else None


def owned_by(command: str, legacy: Optional[Callable[[str], bool]] = None
             ) -> Callable[[str], bool]:
  """An `Output.owned` test: the directory's OWNER_FILE names `command` (or, for directories
  written before t5rank marked them, `legacy` accepts it)."""
  return lambda path: owner(path) == command or (legacy is not None and legacy(path))


def mark_owner(directory: str, command: str) -> None:
  """Writes OWNER_FILE into `directory` (made if needed): `command` made it."""
  os.makedirs(directory, exist_ok=True)
  with atomic_write(os.path.join(directory, OWNER_FILE)) as f:
    json.dump({"command": command}, f)


def _inside(path: str, directory: str) -> bool:
  return path != directory and path.startswith(directory.rstrip(os.sep) + os.sep)


def check_outputs(outputs: Sequence[Output], inputs: Mapping[str, Optional[str]], *,
                  overwrite: bool = False) -> None:
  """Raises OutputError when writing `outputs` could destroy an input or a file the command did not
  write (module docstring). `inputs` maps a flag to a path (None or a missing path: nothing to
  protect)."""
  protected: list[tuple[str, str, str, str]] = []  # (real path, flag, path as given, role)
  for flag, path in inputs.items():
    if path and os.path.lexists(path):
      protected.append((os.path.realpath(path), flag, path, "input"))
  for output in outputs:
    if not output.path:
      continue
    real = os.path.realpath(output.path)
    what = f"{output.flag} {output.path}"
    if output.kind == FILE and os.path.isdir(output.path):
      raise OutputError(f"{what} is a directory; give a file path")
    for other, flag, path, role in protected:
      if real == other:
        raise OutputError(f"{what} is also {flag}; writing it would overwrite that {role}: give "
                          "another path")
      if _inside(real, other):
        raise OutputError(f"{what} lies inside {flag} {path}, an {role}; give a path outside it")
      if _inside(other, real):
        raise OutputError(f"{what} contains {flag} {path}, an {role}; give a path that holds no "
                          f"{role}")
    _check_existing(output, what, overwrite)
    protected.append((real, output.flag, output.path, "output"))


def _check_existing(output: Output, what: str, overwrite: bool) -> None:
  path = output.path
  if output.kind == WORK and os.path.islink(path):
    raise OutputError(f"{what} is a symbolic link; give a plain directory (t5rank writes its "
                      "work there)")
  if not os.path.lexists(path):
    return
  if output.kind == FILE:
    if not overwrite:
      raise OutputError(f"{what} exists; give --overwrite to replace it or another path")
    return
  if not os.path.isdir(path):
    raise OutputError(f"{what} is a file; give a directory path")
  if not os.listdir(path):
    return
  owned = output.owned is not None and output.owned(path)
  if not owned:
    raise OutputError(f"{what} holds files this command did not write; give a new or empty "
                      "directory (t5rank never replaces a directory it did not make)")
  if output.kind == DIRECTORY and not overwrite:
    raise OutputError(f"{what} holds an earlier output of this command; give --overwrite to "
                      "replace it or another path")


# ------------------------------------------------------------------------------------- writing


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w") -> Iterator[IO]:
  """Opens a temporary file next to `path` and renames it to `path` only when the block succeeds,
  so that `path` is either absent (or its old version) or complete."""
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
  try:
    encoding = None if "b" in mode else "utf-8"
    with os.fdopen(fd, mode, encoding=encoding) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; an output gets the usual mode
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.remove(tmp)
    raise


_RENAME_EXCHANGE, _AT_FDCWD = 2, -100


def _exchange(first: str, second: str) -> bool:
  """Swaps two directories in one step (Linux renameat2 RENAME_EXCHANGE); False where the system
  cannot."""
  try:
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = libc.renameat2
  except (OSError, AttributeError):
    return False
  renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                        ctypes.c_uint]
  return renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
                   _RENAME_EXCHANGE) == 0


def remove_stale_temporaries(directory: str) -> None:
  """Removes what a killed `atomic_directory(directory)` left beside it."""
  parent, name = os.path.split(os.path.abspath(directory))
  for marker in (_TEMPORARY, _OLD):
    for stale in glob.glob(os.path.join(glob.escape(parent), f".{glob.escape(name)}{marker}*")):
      shutil.rmtree(stale, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(directory: str, owner: Optional[str] = None) -> Iterator[str]:
  """Yields a new temporary directory beside `directory`; when the block succeeds it takes
  `directory`'s place in one rename (an old `directory` is swapped out, then removed), when it
  fails it is removed: `directory` holds the old set of files or the new one, never a mix, and no
  temporary outlives the next call. `owner` (a command's name) is written into its OWNER_FILE. A
  `directory` that is a symbolic link stays one: the directory it points to is replaced."""
  directory = os.path.abspath(directory)
  if os.path.islink(directory):
    directory = os.path.realpath(directory)
  parent, name = os.path.split(directory)
  os.makedirs(parent, exist_ok=True)
  with writer_lock(directory):
    remove_stale_temporaries(directory)
    temporary = tempfile.mkdtemp(prefix=f".{name}{_TEMPORARY}", dir=parent)
    with _replacing(temporary, directory, owner) as written:
      yield written


@contextlib.contextmanager
def writer_lock(directory: str) -> Iterator[None]:
  """Holds an exclusive lock on `directory`'s lock file (beside it, in a parent that must exist)
  while the block writes the directory: a second writer of the same output, in this process or
  another, is refused at once (OutputError naming the first's pid)."""
  import fcntl

  parent, name = os.path.split(os.path.abspath(directory))
  directory = os.path.join(parent, name)
  path = os.path.join(parent, f".{name}{_LOCK}")
  try:  # never through a link planted under the lock's name
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666 & ~_umask())
  except OSError as e:
    raise OutputError(f"{path}: cannot lock the output there ({e.strerror}); remove that file if "
                      "no t5rank process is writing it") from None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      if not os.path.exists(path) or os.stat(path).st_ino != os.fstat(fd).st_ino:
        raise BlockingIOError  # the holder removed it meanwhile: another writer has begun
    except BlockingIOError:
      holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
      raise OutputError(f"{directory} is being written by another t5rank process (pid "
                        f"{holder}); wait for it to finish or give another path") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    try:
      yield
    finally:
      with contextlib.suppress(FileNotFoundError):
        os.remove(path)
  finally:
    os.close(fd)


@contextlib.contextmanager
def _replacing(temporary: str, directory: str, owner: Optional[str]) -> Iterator[str]:
  """Yields `temporary`; swaps it into `directory`'s place when the block succeeds, removes it
  when not (`atomic_directory`)."""
  parent, name = os.path.split(directory)
  try:
    yield temporary
    if owner is not None:
      mark_owner(temporary, owner)
    os.chmod(temporary, 0o777 & ~_umask())  # mkdtemp makes 0700
    if not os.path.lexists(directory):
      os.rename(temporary, directory)
    elif _exchange(temporary, directory):  # the old set is now at `temporary`
      shutil.rmtree(temporary)
    else:
      old = tempfile.mkdtemp(prefix=f".{name}{_OLD}", dir=parent)
      os.rename(directory, os.path.join(old, name))
      os.rename(temporary, directory)
      shutil.rmtree(old)
  except BaseException:
    shutil.rmtree(temporary, ignore_errors=True)
    raise


# ----------------------------------------------------------------------------------- manifests


def read_json(path: str) -> Optional[dict]:
  """The JSON value in `path`, or None when there is no such file; a file that is not JSON raises
  ValueError naming it (one line: "PATH: not JSON (where it fails)")."""
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    try:
      return json.load(f)
    except ValueError as e:  # a JSON decoder's message, or bytes that are not UTF-8
      raise ValueError(f"{path}: not JSON ({e})") from None


def move_aside(path: str, reason: str) -> str:
  """Moves `path` (a directory a job made and now makes anew) to `path.previous`, replacing an older
  one there, and says why; returns where it went."""
  previous = path.rstrip(os.sep) + ".previous"
  print(f"{path}: {reason}; moving it to {previous}", flush=True)
  shutil.rmtree(previous, ignore_errors=True)
  os.rename(path, previous)
  return previous


def sha256_file(path: str) -> str:
  """The hex sha256 of a file's bytes, read in blocks."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def file_digest(path: str) -> dict:
  """{"bytes": size, "sha256": hex} of a file; files over HASH_LIMIT get their size alone."""
  size = os.path.getsize(path)
  if size > HASH_LIMIT:
    return {"bytes": size}
  return {"bytes": size, "sha256": sha256_file(path)}


def file_manifest(directory: str, exclude: Sequence[str] = ()) -> dict[str, dict]:
  """{relative path: file_digest} of every file under `directory` but `exclude` (relative paths)."""
  manifest = {}
  for root, _, names in os.walk(directory):
    for name in names:
      relative = os.path.relpath(os.path.join(root, name), directory)
      if relative not in exclude:
        manifest[relative] = file_digest(os.path.join(root, name))
  return dict(sorted(manifest.items()))


def check_manifest(directory: str, manifest: Mapping[str, Mapping], what: str,
                   known: Optional[Mapping[str, Mapping]] = None) -> None:
  """Raises ValueError naming the first file of `manifest` that is missing from `directory` or
  differs from its recorded size or hash: a file replaced after `what` was written. `known`: the
  `file_digest` of files the caller read already (relative path -> digest of the bytes it used),
  checked without reading them again."""
  for relative, recorded in manifest.items():
    path = os.path.join(directory, relative)
    if known and relative in known:
      actual = known[relative]
    elif not os.path.isfile(path):
      raise ValueError(f"{path} is missing: {what} lists it in its manifest")
    else:
      actual = file_digest(path)
    if actual["bytes"] != recorded.get("bytes") or (
        "sha256" in recorded and actual.get("sha256") != recorded["sha256"]):
      changed = "size" if actual["bytes"] != recorded.get("bytes") else "sha256"
      raise ValueError(f"{path} is not the file {what} was written with (its {changed} differs "
                       "from the manifest): it was replaced or damaged; restore it or rebuild "
                       f"{what}")


def load_array(path: str):
  """The numpy array in the .npy file `path`; a cut or foreign file raises ValueError naming it."""
  import numpy as np

  try:
    return np.load(path, allow_pickle=False)
  except (ValueError, EOFError, OSError) as e:
    if isinstance(e, FileNotFoundError):
      raise
    raise ValueError(f"{path}: not a readable .npy array ({e})") from None
