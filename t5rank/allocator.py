"""The C allocator's settings for t5rank's processes: keep freed memory instead of giving it back to
the kernel after every step.

XLA's CPU backend (and TensorFlow's input pipeline) allocate and free each step's buffers through
the C library's `malloc`, from several threads. With glibc's defaults, freed memory at the top of a
heap goes back to the kernel as soon as 128 KiB of it are free (`M_TRIM_THRESHOLD`), blocks from
128 KiB up (adapting up to 32 MiB) are `mmap`ped afresh and unmapped on free, and a thread's own
arena cannot hold a block above 64 MiB at all, so it `mmap`s one for every such request: every step
then touches new pages, and the kernel zero-fills each, a minor page fault per 4 KiB. A training
step of the demo's tiny monoT5 allocates a 65 MiB block on a worker thread, so that a `t5rank demo`
spent much of its time in the kernel on minor page faults (HISTORY.md, "Page faults", has the
figures before and after).

`keep_freed_memory` sets, at start-up: one arena for all threads (`M_ARENA_MAX` 1: the main heap,
which can hold blocks of any size), no `mmap`ped blocks (`M_MMAP_MAX` 0), and up to 1 GiB of freed
memory kept by the process (`M_TRIM_THRESHOLD`). Freed blocks are then reused by the next step. The
costs: resident memory that is not returned after a peak, and one allocator lock shared by all
threads (measured on 2 cores only; on a many-core host compare with `T5RANK_KEEP_FREED_MEMORY=0`).
Scores and training are unchanged: only where memory comes from changes. Users who set the
allocator themselves (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_MAX_`, `MALLOC_MMAP_THRESHOLD_`,
`MALLOC_TRIM_THRESHOLD_`, `MALLOC_TOP_PAD_`, `GLIBC_TUNABLES` with `glibc.malloc`, or
`T5RANK_KEEP_FREED_MEMORY=0`) keep their settings; other C libraries (musl, macOS) are left alone.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from typing import Mapping, Optional

logger = logging.getLogger(__name__)

# glibc's mallopt parameters (malloc.h) and the values set
SETTINGS = ((-8, 1),  # M_ARENA_MAX: one arena, whose heap holds blocks of any size
            (-4, 0),  # M_MMAP_MAX: no block is mmapped (and unmapped when freed)
            (-1, 1 << 30))  # M_TRIM_THRESHOLD: keep up to 1 GiB of freed memory
USER_SETTINGS = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_",
                 "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")
SWITCH = "T5RANK_KEEP_FREED_MEMORY"


def user_has_settings(environ: Mapping[str, str]) -> bool:
  """Whether `environ` sets glibc's allocator itself, or turns this off ("0")."""
  return (any(name in environ for name in USER_SETTINGS)
          or "glibc.malloc" in environ.get("GLIBC_TUNABLES", "")
          or environ.get(SWITCH, "1") == "0")


def keep_freed_memory(environ: Optional[Mapping[str, str]] = None) -> bool:
  """Sets glibc's allocator to one arena, no mmapped blocks and a trim threshold of 1 GiB for this
  process (module docstring); returns whether all three were set. Does nothing (False) where the
  user set the allocator (`user_has_settings`), off Linux, or where the C library has no working
  `mallopt`."""
  environ = os.environ if environ is None else environ
  if not sys.platform.startswith("linux") or user_has_settings(environ):
    return False
  try:
    mallopt = ctypes.CDLL(None).mallopt
  except (OSError, AttributeError):
    return False
  mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
  done = all([mallopt(parameter, value) == 1 for parameter, value in SETTINGS])
  if not done:  # musl's mallopt is a stub returning 0
    logger.debug("mallopt refused the settings; the C library's defaults stay")
  return done
