"""`t5rank serve`'s warm-up per shipped family, as a server with the default limits does it.

    .venv/bin/python benchmarks/serve_warmup.py

Each family in a process of its own, the compilation cache off (`T5RANK_COMPILATION_CACHE=0`:
every shape compiled, as on a first start): the seconds `t5rank.serving.warmup.warm_up` takes with
`--max-texts 1000` and `--max-batch-pairs 1024` (steps of at most 1,024 inputs), the shapes it
compiles and the process's peak RSS. tests/test_serve_guard.py checks each under 60 s and 4 GB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CHILD = """
import resource, sys, time
import t5rank
from t5rank.serving.warmup import warm_up
ranker = t5rank.load(f"shipped:{sys.argv[1]}")
started = time.perf_counter()
report = warm_up(ranker, 1024)
print(f"{time.perf_counter() - started:.1f} {len(report['shapes'])} "
      f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f}")
"""


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--models", default="monot5,duot5,tk,dual_encoder",
                      help="shipped models, comma-separated")
  args = parser.parse_args()
  env = {**os.environ, "T5RANK_COMPILATION_CACHE": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
  print("| model | warm-up | shapes | peak RSS |\n| --- | --- | --- | --- |")
  for name in args.models.split(","):
    result = subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True,
                            env=env, check=True)
    seconds, shapes, gb = result.stdout.split()
    print(f"| shipped:{name} | {seconds} s | {shapes} | {gb} GB |", flush=True)


if __name__ == "__main__":
  main()
