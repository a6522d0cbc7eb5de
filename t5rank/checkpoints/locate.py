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

Commands resolve a name here before they check their outputs against their inputs, so that no
output can land inside a checkpoint given by name.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from t5rank.checkpoints import shipped

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
  except ImportError:
    raise HubError(f"{repo} looks like a Hugging Face Hub id, but huggingface_hub is not "
                   "installed (pip install huggingface-hub)") from None
  cache = hub_cache()
  label = repo + (f"@{revision}" if revision else "")
  try:
    return huggingface_hub.snapshot_download(repo, revision=revision, cache_dir=cache,
                                             local_files_only=True)
  except Exception:  # not in the cache (huggingface_hub's LocalEntryNotFoundError and kin)
    pass
  fetch = (f"`hf download {repo} {' '.join(HUB_FILES[:2])} model.safetensors"
           f"{' --revision ' + revision if revision else ''}` on a machine with network "
           "(the same HF_HUB_CACHE), or give a local directory")
  if _offline():
    raise HubError(f"{label} is neither a local directory nor in the Hugging Face cache {cache}, "
                   f"and HF_HUB_OFFLINE is set: fetch it first, e.g. {fetch}")
  try:
    # model_info: one request (the file listing retries for half a minute without a network)
    info = huggingface_hub.model_info(repo, revision=revision)
    files = [sibling.rfilename for sibling in info.siblings or ()]
    patterns = [*HUB_FILES, *weight_patterns(files, label)]
    return huggingface_hub.snapshot_download(repo, revision=revision, cache_dir=cache,
                                             allow_patterns=patterns)
  except HubError:
    raise
  except Exception as e:  # no network, no such repository, a gated one: the client's own words
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    raise HubError(f"{label} is neither a local directory nor in the Hugging Face cache {cache}, "
                   f"and downloading it failed ({type(e).__name__}: {first[:200]}); fetch it "
                   f"with {fetch}") from None


def weight_patterns(files: list[str], label: str) -> tuple[str, ...]:
  """The file patterns of the first weights format (HUB_WEIGHTS' order) that `files` (a
  repository's listing) holds."""
  import fnmatch

  for patterns in HUB_WEIGHTS:
    if any(fnmatch.fnmatch(f, p) for f in files for p in patterns):
      return patterns
  raise HubError(f"{label} holds no T5 weights t5rank reads (model.safetensors, "
                 "flax_model.msgpack or pytorch_model.bin, whole or sharded)")
