"""Running a reader on a hostile file in a child process bounded in memory and time, so that a
regression fails the test (MemoryError, a kill, a timeout) instead of swapping the machine or
hanging CI.

    result = read_bounded("from t5rank.checkpoints.torch_pickle import open_torch_file\n"
                          "open_torch_file(PATH)", path)
    assert result.returncode == 1 and result.stderr.count("\\n") == 1
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

# address space of the child: a Python with numpy and the reader imported takes ~0.3 GB of it
MEMORY_BYTES = 1 << 30
SECONDS = 30

# The child: runs CODE with PATH bound, prints a CheckpointError / ValueError / OSError as the one
# line the CLI would print and exits 1; anything else escapes as a traceback (exit 1 as well, but
# stderr has many lines), a crash gives a negative return code, a hang the timeout.
_RUNNER = textwrap.dedent("""
    import sys
    PATH = sys.argv[1]
    try:
        exec(compile(sys.argv[2], "<hostile>", "exec"))
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    print("ok")
""")


def _limit(memory: int):
  def apply() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
  return apply


def read_bounded(code: str, path: str, *, memory: int = MEMORY_BYTES,
                 seconds: float = SECONDS) -> subprocess.CompletedProcess:
  """Runs `code` (with `PATH` = `path`) in a child limited to `memory` bytes of address space;
  raises subprocess.TimeoutExpired after `seconds`."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
  return subprocess.run([sys.executable, "-c", _RUNNER, path, code], capture_output=True,
                        text=True, timeout=seconds, preexec_fn=_limit(memory), env=env)


def one_line_error(result: subprocess.CompletedProcess) -> str:
  """The refusal of a child run by `read_bounded`, after checking it is one `error:` line with
  no traceback and no control character."""
  assert result.returncode == 1, (result.returncode, result.stdout, result.stderr[-2000:])
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
  assert not any(ord(c) < 32 or ord(c) == 127 for c in lines[0]), repr(lines[0][:200])
  return lines[0]
