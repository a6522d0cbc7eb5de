"""`t5rank.tasks` from a checkout on PYTHONPATH, with no install mapping `tasks/` into the package
(#68 item 7): the trainer imports its tasks either way."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the child forgets the editable install's finder, as a checkout that was never installed has none
CHILD = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
import seqio
import t5rank.tasks
print(t5rank.tasks.__file__)
print("insuranceqa_en_monot5_true_false" in seqio.TaskRegistry.names())
"""


def test_tasks_import_from_a_checkout_on_pythonpath():
  env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
  result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                          cwd="/", timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  path, registered = result.stdout.split()
  assert path == os.path.join(ROOT, "tasks", "__init__.py") and registered == "True"
