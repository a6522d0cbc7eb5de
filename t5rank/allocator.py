"""The C allocator's settings for t5rank's processes: keep freed memory instead of giving it back to
the kernel after every step.

XLA's CPU backend (and TensorFlow's input pipeline) allocate and free each step's buffers through
the C library's `malloc`. With glibc's defaults, freed memory at the top of a heap is returned to the
kernel as soon as more than 128 KiB of it is free (`M_TRIM_THRESHOLD`), and blocks from 128 KiB up
are `mmap`ped afresh (`M_MMAP_THRESHOLD`; both thresholds adapt upwards only after an `mmap`ped
block is freed, and some libraries fix them): every batch then touches new pages and the kernel
zero-fills each, a minor page fault per 4 KiB. On the 2-core development VM a `t5rank demo` spent
839 s of its 25 minutes in the kernel, on 346 million minor page faults (BENCHMARKS.md, "Page
faults", has the figures before and after).

`keep_freed_memory` raises both thresholds at start-up: blocks up to 32 MiB (glibc's largest
`mmap` threshold on 64-bit) come from the heaps and are reused, and up to 1 GiB of freed memory
stays with the process. The cost is resident memory that is not returned after a peak (a few
hundred MB at most for the tiny models, BENCHMARKS.md). Scores and
training are unchanged: only where memory comes from changes. Users who set the allocator
themselves (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, `GLIBC_TUNABLES` with
`glibc.malloc`, or `T5RANK_KEEP_FREED_MEMORY=0`) keep their settings; other C libraries (musl,
macOS) are left alone.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from typing import Mapping, Optional

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: mallopt refuses more
TRIM_THRESHOLD = 1 << 30
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")
SWITCH = "T5RANK_KEEP_FREED_MEMORY"


def user_has_settings(environ: Mapping[str, str]) -> bool:
  """Whether `environ` sets glibc's allocator thresholds itself, or turns this off ("0")."""
  return (any(name in environ for name in USER_SETTINGS)
          or "glibc.malloc" in environ.get("GLIBC_TUNABLES", "")
          or environ.get(SWITCH, "1") == "0")


def keep_freed_memory(environ: Optional[Mapping[str, str]] = None) -> bool:
  """Raises glibc's mmap threshold to 32 MiB and its trim threshold to 1 GiB for this process
  (module docstring); returns whether both were set. Does nothing (False) where the user set the
  allocator (`user_has_settings`), off Linux, or where the C library has no working `mallopt`."""
  environ = os.environ if environ is None else environ
  if not sys.platform.startswith("linux") or user_has_settings(environ):
    return False
  try:
    mallopt = ctypes.CDLL(None).mallopt
  except (OSError, AttributeError):
    return False
  mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
  done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD,
                                                                    TRIM_THRESHOLD) == 1
  if not done:  # musl's mallopt is a stub returning 0
    logger.debug("mallopt refused the thresholds; the C library's defaults stay")
  return done
