"""Writes tests/golden/span_corruption.json: T5's span corruption computed by the `t5` package itself.

The `t5` package (0.9.4, the last release) is not a dependency (it installs mesh-tensorflow, torch
and transformers); this script downloads its wheel with `pip download --no-deps`, loads only
`t5/data/preprocessors.py` from it (its one import outside our pins, `babel`, serves translation
tasks and is stubbed) and runs its `span_corruption`, `random_spans_noise_mask` and
`random_spans_helper` on literal rows with fixed seeds. tests/test_span_corruption.py runs
t5rank's `t5rank.data.span_corruption` on the same rows and seeds and must get the same ids.

    .venv/bin/python scripts/make_span_corruption_goldens.py [--wheel t5-0.9.4-py2.py3-none-any.whl]
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import types
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
OUT = os.path.join(REPO, "tests", "golden", "span_corruption.json")
T5_VERSION = "0.9.4"

# Literal rows: short and long documents, one shorter than a span corruption piece.
TEXTS = [
    "A deductible is the amount you pay before your insurance pays anything.",
    "Term life insurance covers a set number of years; whole life insurance lasts as long as the "
    "premiums are paid and builds a cash value over time.",
    "Yes.",
    "Renters insurance protects your belongings against theft, fire and water damage, and it pays "
    "for a hotel if your apartment cannot be lived in after a covered loss. It does not cover the "
    "building itself, which is the landlord's policy.",
    "Medicare Part B pays for doctor visits.",
]
VOCABULARY = "insuranceqa_en_8k_sentinels"
CASES = [  # (inputs length, targets length, map seed)
    (32, 8, 0), (32, 8, 7), (64, 16, 3),
]
MASKS = [(10, (1, 2), (3, 4)), (37, (5, 6), (7, 8)), (100, (11, 12), (13, 14))]
HELPER_LENGTHS = (512, 128, 64, 32)


def t5_wheel(given: str | None) -> str:
  if given:
    return given
  directory = tempfile.mkdtemp()
  subprocess.run([sys.executable, "-m", "pip", "download", f"t5=={T5_VERSION}", "--no-deps",
                  "--quiet", "-d", directory], check=True)
  return glob.glob(os.path.join(directory, "t5-*.whl"))[0]


def load_t5_preprocessors(wheel: str):
  directory = tempfile.mkdtemp()
  with zipfile.ZipFile(wheel) as archive:
    path = archive.extract("t5/data/preprocessors.py", directory)
  sys.modules.setdefault("babel", types.ModuleType("babel"))  # used only by translation tasks
  spec = importlib.util.spec_from_file_location("t5_data_preprocessors", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def tokenized_dataset(vocabulary):
  import tensorflow as tf

  ids = [vocabulary.encode(text) for text in TEXTS]
  return tf.data.Dataset.from_generator(
      lambda: ({"targets": row} for row in ids),
      output_signature={"targets": tf.TensorSpec([None], tf.int32)})


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--wheel", help="the t5 0.9.4 wheel (downloaded from PyPI when not given)")
  args = parser.parse_args()

  import seqio
  import tensorflow as tf

  from t5rank.data.preprocessors import output_features

  t5 = load_t5_preprocessors(t5_wheel(args.wheel))
  features = output_features(VOCABULARY)
  vocabulary = features["targets"].vocabulary
  golden = {"t5_version": T5_VERSION, "vocabulary": VOCABULARY, "texts": TEXTS,
            "helper": {str(n): list(t5.random_spans_helper(
                inputs_length=n, noise_density=0.15, mean_noise_span_length=3.0,
                extra_tokens_per_span_inputs=1, extra_tokens_per_span_targets=1))
                for n in HELPER_LENGTHS},
            "masks": [], "cases": []}
  for length, seed_a, seed_b in MASKS:
    mask = t5.random_spans_noise_mask(length, 0.15, seeds=tf.constant([seed_a, seed_b]),
                                      mean_noise_span_length=3.0)
    golden["masks"].append({"length": length, "seeds": [seed_a, seed_b],
                            "mask": [int(v) for v in mask.numpy()]})
  for inputs_length, targets_length, seed in CASES:
    lengths = {"inputs": inputs_length, "targets": targets_length}
    with seqio.map_seed_manager(seed):
      dataset = t5.span_corruption(tokenized_dataset(vocabulary), lengths, features)
    rows = [{"inputs": [int(v) for v in ex["inputs"]], "targets": [int(v) for v in ex["targets"]]}
            for ex in dataset.as_numpy_iterator()]
    golden["cases"].append({"sequence_length": lengths, "map_seed": seed, "examples": rows})
  os.makedirs(os.path.dirname(OUT), exist_ok=True)
  with open(OUT, "w") as f:
    json.dump(golden, f, indent=1)
    f.write("\n")
  print(f"wrote {OUT}: {sum(len(c['examples']) for c in golden['cases'])} examples in "
        f"{len(CASES)} cases, {len(MASKS)} masks")


if __name__ == "__main__":
  main()
