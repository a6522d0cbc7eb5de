"""`t5rank.allocator`: the glibc thresholds that stop a process from page-faulting freed memory back
in every step, and the user's own settings left alone."""

import os
import platform
import subprocess
import sys

import pytest

from t5rank import allocator

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

# Two patterns, each measured after a warm-up round. Heap: 4 rounds of 500 blocks of 100,000 bytes (each below glibc's default 128 KiB mmap threshold, so
# from the heap), allocated, zero-filled and freed after a first warm-up round. With glibc's default
# trim threshold (128 KiB) each freed 50 MB heap top goes back to the kernel and the next round
# faults its 12,208 pages in again: about 4 x 12,208 = 48,800 faults. Thread: 4 blocks of 80 MB,
# each allocated, zero-filled and freed by a second thread, as XLA's workers do with a training
# step's 65 MiB buffer: a thread's arena holds at most 64 MiB, so glibc mmaps each such block and
# unmaps it when freed, and each faults its 19,532 pages in: about 78,000 faults. Kept, none.
CHURN = """
import resource, sys, threading
from t5rank.allocator import keep_freed_memory
print(keep_freed_memory() if sys.argv[1] == "keep" else "default")
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def heap():
  blocks = [bytearray(100_000) for _ in range(500)]; del blocks
def thread():
  worker = threading.Thread(target=lambda: bytearray(80_000_000)); worker.start(); worker.join()
for pattern in (heap, thread):
  pattern()
  start = faults()
  for _ in range(4):
    pattern()
  print(faults() - start)
"""


def _churn(mode: str) -> tuple[str, int, int]:
  env = {k: v for k, v in os.environ.items()
         if k not in allocator.USER_SETTINGS and k not in ("GLIBC_TUNABLES", allocator.SWITCH)}
  out = subprocess.run([sys.executable, "-c", CHURN, mode], env=env, check=True,
                       capture_output=True, text=True).stdout.split()
  return out[0], int(out[1]), int(out[2])


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_kept_memory_is_not_faulted_in_again():
  applied, heap_kept, thread_kept = _churn("keep")
  default, heap_faults, thread_faults = _churn("default")
  assert applied == "True" and default == "default"
  assert heap_faults > 40_000  # 4 rounds x 12,208 pages given back and faulted in again
  assert thread_faults > 70_000  # 4 x 19,532 pages mmapped afresh
  assert heap_kept < 2_000 and thread_kept < 2_000


def test_the_users_settings_win():
  assert allocator.user_has_settings({"MALLOC_TRIM_THRESHOLD_": "0"})
  assert allocator.user_has_settings({"MALLOC_MMAP_THRESHOLD_": "65536"})
  assert allocator.user_has_settings({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
  assert allocator.user_has_settings({"T5RANK_KEEP_FREED_MEMORY": "0"})
  assert not allocator.user_has_settings({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"})
  assert not allocator.user_has_settings({"T5RANK_KEEP_FREED_MEMORY": "1", "PATH": "/bin"})
  assert allocator.keep_freed_memory({"MALLOC_TRIM_THRESHOLD_": "0"}) is False


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_applied_without_user_settings():
  assert allocator.keep_freed_memory({}) is True
