"""sha256 of the first N training batches of a task, to check that a change leaves the data alone.

    .venv/bin/python scripts/training_batches_sha256.py                      # the demo's task, 300
    .venv/bin/python scripts/training_batches_sha256.py --task NAME --batches 50 --inputs 512

Feeds the batches of `t5rank.data.training_data.training_dataset` (seed 0, no packing, one shard)
through one sha256, every feature in name order, and prints the digest. Run it before and after a
change on the same machine: equal digests mean the model is trained on the same ids.
"""

import argparse
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--task", default="insuranceqa_en_8k_pseudo_bm25_monot5_true_false")
  parser.add_argument("--batches", type=int, default=300)
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--inputs", type=int, default=96, help="input feature length")
  args = parser.parse_args()

  import t5rank.tasks  # noqa: F401  (registers the tasks)
  from t5rank.data.training_data import training_dataset

  batches = training_dataset(args.task, batch_size=args.batch_size,
                             feature_lengths={"inputs": args.inputs, "targets": 2}, seed=0,
                             start_step=0, pack=False, shard_index=0, num_shards=1)
  digest = hashlib.sha256()
  for _ in range(args.batches):
    batch = next(batches)
    for name in sorted(batch):
      digest.update(name.encode())
      digest.update(np.ascontiguousarray(batch[name]).tobytes())
  print(f"{args.task}: {args.batches} batches of {args.batch_size}, sha256 {digest.hexdigest()}",
        flush=True)
  os._exit(0)  # TensorFlow's dataset iterator can hang in interpreter shutdown


if __name__ == "__main__":
  main()
