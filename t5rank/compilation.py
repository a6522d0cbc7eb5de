"""JAX's persistent compilation cache for every t5rank command that compiles.

A compiled program is stored on disk the first time and read back by later runs of the same
program on the same backend, so a second `t5rank score` of one checkpoint and shapes starts without
compiling again. JAX keys each entry by the computation itself (its HLO), the compile options and
the backend; the directory also names the jax, jaxlib and t5rank versions, so that an upgrade
starts a fresh cache instead of sharing one:

    $T5RANK_CACHE_DIR, else $XDG_CACHE_HOME/t5rank, else ~/.cache/t5rank
        /jax-0.10.2-jaxlib-0.10.2-t5rank-0.1.0/   one file per compiled program

`t5rank --no-compilation-cache COMMAND ...` or T5RANK_COMPILATION_CACHE=0 turns it off; a cache
directory set in JAX's own configuration (JAX_COMPILATION_CACHE_DIR) is left as it is.
"""

from __future__ import annotations

import logging
import os
from typing import Optional

logger = logging.getLogger(__name__)
SWITCH = "T5RANK_COMPILATION_CACHE"


def cache_directory() -> str:
  """The versioned cache directory of this jax, jaxlib and t5rank (module docstring)."""
  import jax
  import jaxlib

  root = os.environ.get("T5RANK_CACHE_DIR") or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
      "t5rank")
  import t5rank

  return os.path.join(root, f"jax-{jax.__version__}-jaxlib-{jaxlib.__version__}-t5rank-"
                            f"{t5rank.__version__}")


def enable_compilation_cache(directory: Optional[str] = None) -> Optional[str]:
  """Turns JAX's persistent cache on in `directory` (default `cache_directory()`) for every
  program, however fast it compiled; returns the directory, or None when T5RANK_COMPILATION_CACHE
  is 0 or JAX already has a cache directory."""
  import jax

  if os.environ.get(SWITCH, "1") == "0":
    return None
  if jax.config.jax_compilation_cache_dir:
    return None
  directory = directory or cache_directory()
  try:
    os.makedirs(directory, exist_ok=True)
  except OSError as e:  # a read-only home: run without the cache
    logger.warning("no compilation cache (%s)", e)
    return None
  jax.config.update("jax_compilation_cache_dir", directory)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return directory
