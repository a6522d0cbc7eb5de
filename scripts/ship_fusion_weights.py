"""Ships the English cascade's fusion weights with its models: t5rank/shipped/
insuranceqa_cascade_weights.json, read by `t5rank demo` instead of tuning them again.

    t5rank demo --output runs/ship_weights          # the shipped models; weights tuned on the
                                                     # first 1,000 validation queries
    python scripts/ship_fusion_weights.py runs/ship_weights \\
        --command "t5rank demo --output runs/ship_weights"

WORKDIR is a finished `t5rank demo` (the English cascade) whose every model was the shipped one
and whose weights were tuned there (not read from a shipped file). The file holds the weights
(each fusion row's runs, its members' parameter hashes and depths: `t5rank rerank --fusion-weights
FILE` takes it too), the cascade's rows, depths and validation queries, each model's recipe hash
and the hash of its manifest (its files),
the validation cascade's evaluation, the command, date and machine. The demo uses it only while
each of these is still its own (`insuranceqa_provisioning.shipped_weights`); tests/test_shipped.py
fails when a model shipped later no longer has the parameters the weights were tuned with. An
existing file is refused unless --replace.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scripts.ship_model import machine  # noqa: E402
from t5rank.checkpoints import shipped  # noqa: E402
from t5rank.files import atomic_write, read_json  # noqa: E402
from t5rank.pipelines.insuranceqa_catalogue import ENGLISH_CASCADE  # noqa: E402
from t5rank.pipelines.insuranceqa_provisioning import weights_identity  # noqa: E402


def weights_entry(results: dict, command: str) -> dict:
  """What the shipped file holds, from a demo's results.json (module docstring); ValueError when
  the demo is not one the file may come from."""
  job = ENGLISH_CASCADE
  names = [model for _, model in job.rerankers]
  models = results.get("models", {})
  if list(results.get("depths", {})) != names:
    raise ValueError(f"not the English cascade's results (its models are {names})")
  not_shipped = [n for n in names if models.get(n, {}).get("source") != "shipped"]
  if not_shipped:
    raise ValueError(f"{not_shipped} were not the shipped models: ship them first "
                     "(scripts/ship_model.py), then run the demo again")
  fusion = results["fusion"]
  if "tune_queries" not in fusion:
    raise ValueError("made by an earlier t5rank (its results.json does not say how many "
                     "validation queries tuned the weights): run the same demo again")
  if "shipped" in fusion:
    raise ValueError("its weights were read from the shipped file (the same models, depths and "
                     "validation queries), not tuned: nothing new to ship")
  identity = weights_identity(job, job.rerankers, [results["depths"][n] for n in names],
                              fusion["tune_queries"], models)
  return {**identity,
          "fusion": {"tuned_on": fusion["tuned_on"], "weights": fusion["weights"]},
          "validation": fusion["validation"], "command": command,
          "date": datetime.date.today().isoformat(), "machine": machine()}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("workdir", help="a finished `t5rank demo` work directory")
  parser.add_argument("--command", required=True, help="the command that made WORKDIR")
  parser.add_argument("--replace", action="store_true", help="replace the shipped weights")
  args = parser.parse_args(argv)
  results = read_json(os.path.join(args.workdir, "results.json"))
  if results is None:
    raise SystemExit(f"{args.workdir}/results.json: no such file (a finished `t5rank demo`)")
  try:
    entry = weights_entry(results, args.command)
  except ValueError as e:
    raise SystemExit(f"{args.workdir}: {e}") from None
  target = os.path.join(shipped.DIRECTORY, ENGLISH_CASCADE.weights_file)
  if os.path.exists(target) and not args.replace:
    raise SystemExit(f"{target} exists: --replace to ship these weights instead")
  with atomic_write(target) as f:
    json.dump(entry, f, indent=1)
  rows = entry["fusion"]["weights"].items()
  print(f"wrote {target}: " + ", ".join(f"{row} {e['weights']}" for row, e in rows))
  return 0


if __name__ == "__main__":
  sys.exit(main())
