"""Where a checkpoint name becomes a local directory: the one place every command, the trainer and
the Python API turn what a user typed into a path.

    local_path("runs/model/final")              a path: as it is
    local_path("shipped:monot5")                a model t5rank ships (t5rank/shipped/monot5)
    local_path("castorini/monot5-base-msmarco")          a Hugging Face Hub id ...
    local_path("castorini/monot5-base-msmarco@a1b2c3d")  ... at a revision (a branch, tag or commit)

The rule, in this order: an existing local path wins (a directory named `castorini/monot5-base-
msmarco` beside you is that directory, not the Hub's model, and a name under a directory that exists
here, such as `runs/model`, or a TensorFlow prefix, is a path); then `shipped:NAME`; then a Hub id
`ORG/NAME[@REVISION]`, resolved with `huggingface_hub` (the ecosystem's own client): from the local
Hugging Face cache when it is there (`HF_HUB_CACHE`, else `HF_HOME/hub`, else
~/.cache/huggingface/hub), else downloaded into that cache, only `config.json`, the SentencePiece
model, `t5rank.json` and ONE weights format (the first the repository has of safetensors,
`flax_model.msgpack`, `pytorch_model.bin`, each whole or sharded). With `HF_HUB_OFFLINE=1` nothing
is downloaded, and an id that is not cached is refused with one line saying how to fetch it.

A revision is a branch, tag or commit by git's rules (no `..`, no part that starts with `.`, no
leading or trailing `/`), and the directory the cache resolves it to must lie inside the cache's
snapshots of that repository, whatever its refs files say. Every request to the Hub has
huggingface_hub's own time limits, which its environment variables set: `HF_HUB_ETAG_TIMEOUT`
(seconds, default 10) for the listing and each file's metadata, `HF_HUB_DOWNLOAD_TIMEOUT` (default
10) for a stalled download; a Hub that does not answer is refused with one line.

Commands resolve a name here before they check their outputs against their inputs, so that no
output can land inside a checkpoint given by name.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Optional

from t5rank.checkpoints import shipped
from t5rank.checkpoints.untrusted import quote

HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?",
                    re.ASCII)
# besides the weights, what a reranker needs from a Hub repository
HUB_FILES = ("config.json", "spiece.model", "t5rank.json", "generation_config.json")
# the weights formats, in the order t5rank reads them (`t5rank.checkpoints.formats`)
HUB_WEIGHTS = (("model.safetensors", "model.safetensors.index.json", "model-*.safetensors"),
               ("flax_model.msgpack", "flax_model.msgpack.index.json",
                "flax_model-*.msgpack"),
               ("pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"))


class HubError(ValueError):
  """A Hub id that cannot be resolved to a local directory; the message says why and what to do."""


def local_path(name: Optional[str]) -> Optional[str]:
  """The local path of checkpoint `name` (module docstring): a path as it is, `shipped:NAME` a
  shipped model's directory, `ORG/NAME[@REVISION]` the Hub snapshot's directory in the local cache
  (downloaded there if need be and allowed). None stays None. Raises ValueError (HubError) with
  one line when a name cannot be resolved."""
  if name is None or os.path.exists(name):
    return name
  if name.startswith(shipped.PREFIX):
    return shipped.resolve(name)
  match = HUB_ID.fullmatch(name)
  if match is None or _local_looking(name):
    return name  # a path that does not exist (or a TF prefix): the reader says so
  return hub_snapshot(match["repo"], match["revision"])


def _local_looking(name: str) -> bool:
  """Whether `name` is meant as a local path although it does not exist: absolute or explicitly
  relative, a TensorFlow checkpoint prefix (`DIR/model.ckpt-N`: its `.index` exists), or under a
  directory that exists here (`runs/model` beside a `runs/`)."""
  return (name.startswith((".", "/", "~")) or os.path.exists(name + ".index")
          or os.path.isdir(name.split("/", 1)[0]))


def is_hub_id(name: str) -> bool:
  """Whether `name` reads as a Hub id and is no local path."""
  return not os.path.exists(name) and not _local_looking(name) and bool(HUB_ID.fullmatch(name))


def hub_cache() -> str:
  """The Hugging Face cache directory, read from the environment now (not at import)."""
  if os.environ.get("HF_HUB_CACHE"):
    return os.environ["HF_HUB_CACHE"]
  home = os.environ.get("HF_HOME") or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
      "huggingface")
  return os.path.join(home, "hub")


def _offline() -> bool:
  return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_snapshot(repo: str, revision: Optional[str] = None) -> str:
  """The local directory of Hub repository `repo` at `revision` (None: main): the cached snapshot,
  or one downloaded into the cache with only the files a reranker reads (module docstring)."""
  try:
    import huggingface_hub
    from huggingface_hub import constants
  except ImportError:
    raise HubError(f"{repo} looks like a Hugging Face Hub id, but huggingface_hub is not "
                   "installed (pip install huggingface-hub)") from None
  cache = hub_cache()
  label = repo + (f"@{revision}" if revision else "")
  if revision is not None:
    check_revision(revision, label)
  try:
    return _inside_cache(huggingface_hub.snapshot_download(
        repo, revision=revision, cache_dir=cache, local_files_only=True), cache, repo, label)
  except HubError:
    raise
  except Exception:  # not in the cache (huggingface_hub's LocalEntryNotFoundError and kin)
    pass
  fetch = (f"`hf download {repo} {' '.join(HUB_FILES[:2])} model.safetensors"
           f"{' --revision ' + revision if revision else ''}` on a machine with network "
           "(the same HF_HUB_CACHE), or give a local directory")
  if _offline():
    raise HubError(f"{label} is neither a local directory nor in the Hugging Face cache {cache}, "
                   f"and HF_HUB_OFFLINE is set: fetch it first, e.g. {fetch}")
  timeout = constants.HF_HUB_ETAG_TIMEOUT
  try:
    info = huggingface_hub.model_info(repo, revision=revision, timeout=timeout)
    files = [sibling.rfilename for sibling in info.siblings or ()]
    patterns = [*HUB_FILES, *weight_patterns(files, label)]
    paths = [huggingface_hub.hf_hub_download(repo, name, revision=revision, cache_dir=cache,
                                             etag_timeout=timeout)
             for name in files
             if "/" not in name and any(fnmatch.fnmatch(name, p) for p in patterns)]
  except HubError:
    raise
  except Exception as e:  # no network, no such repository, a gated one: the client's own words
    if _timed_out(e):
      raise HubError(
          f"{label} is neither a local directory nor in the Hugging Face cache {cache}, and the "
          f"Hub did not answer within {timeout:g} s ({type(e).__name__}); give it longer with "
          "HF_HUB_ETAG_TIMEOUT=SECONDS (HF_HUB_DOWNLOAD_TIMEOUT for a slow download), or fetch "
          f"it with {fetch}") from None
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    raise HubError(f"{label} is neither a local directory nor in the Hugging Face cache {cache}, "
                   f"and downloading it failed ({type(e).__name__}: {quote(first, 200)}); fetch it "
                   f"with {fetch}") from None
  snapshots = {os.path.dirname(path) for path in paths}
  if len(snapshots) != 1:
    raise HubError(f"{label} changed on the Hub while it was downloaded (its files come from "
                   f"{len(snapshots)} commits): run again")
  return _inside_cache(snapshots.pop(), cache, repo, label)


def check_revision(revision: str, label: str) -> None:
  """Refuses `revision` (of Hub id `label`) unless it is a branch, tag or commit name by git's
  rules (`git check-ref-format`): no `..`, no empty part (a leading, trailing or double `/`), no
  part that starts with `.` or ends with `.` or `.lock`, no leading `-`."""
  parts = revision.split("/")
  if (".." in revision or revision.startswith("-")
      or any(not part or part.startswith(".") or part.endswith((".", ".lock")) for part in parts)):
    raise HubError(f"{label}: {quote(revision)} is not a branch, tag or commit name (no '..', no "
                   "part starting with '.' or ending with '.' or '.lock', no leading, trailing or "
                   "double '/')")


def _inside_cache(path: str, cache: str, repo: str, label: str) -> str:
  """`path`, the snapshot directory huggingface_hub gave for `label`, after checking that it lies
  inside the cache's snapshots of `repo` (a refs file can name any directory)."""
  snapshots = os.path.realpath(os.path.join(cache, f"models--{repo.replace('/', '--')}",
                                            "snapshots"))
  real = os.path.realpath(path)
  if os.path.dirname(real) != snapshots:
    raise HubError(f"{label} resolves to {quote(real, 160)}, outside the Hugging Face cache's "
                   f"snapshots of {repo} ({snapshots}): its refs file is damaged; delete it and "
                   "fetch the revision again")
  return path


def _timed_out(error: BaseException) -> bool:
  """Whether `error`, or an error it was raised from, is a network time-out (httpx's or
  requests', whichever huggingface_hub uses)."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if any("Timeout" in kind.__name__ for kind in type(error).__mro__):
      return True
    error = error.__cause__ or error.__context__
  return False


def weight_patterns(files: list[str], label: str) -> tuple[str, ...]:
  """The file patterns of the first weights format (HUB_WEIGHTS' order) that `files` (a
  repository's listing) holds."""
  for patterns in HUB_WEIGHTS:
    if any(fnmatch.fnmatch(f, p) for f in files for p in patterns):
      return patterns
  raise HubError(f"{label} holds no T5 weights t5rank reads (model.safetensors, "
                 "flax_model.msgpack or pytorch_model.bin, whole or sharded)")
