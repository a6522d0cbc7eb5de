"""`t5rank inspect-task NAME`: print a few examples of a SeqIO task exactly as the model gets them.

The first triples of the split, in source order, each as its positive then its negative example.
For each example: the input text, the target text, and the token ids with their pieces. A
pre-training task (span corruption) shows its first examples: inputs and targets decoded, sentinels
as `<extra_id_N>`, with `--max-length` the inputs length (the targets length follows from it), e.g.

    t5rank inspect-task insuranceqa_en_monot5_hot_cold --split validation --num-examples 2
    t5rank inspect-task insuranceqa_en_8k_span_corruption --split validation --max-length 128
    t5rank inspect-task msmarco_passage_monot5_true_false \\
        --gin.msmarco_passage_triples.path=/data/msmarco/triples.train.small.tsv
"""

from __future__ import annotations

import argparse

from t5rank.commands import positive_int, renamed


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("inspect-task", help="print decoded examples of a SeqIO task",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("name", help="task name, e.g. insuranceqa_en_monot5_true_false")
  p.add_argument("--split", default="train")
  p.add_argument("--num-examples", type=positive_int, default=3, metavar="N", dest="n",
                 help="number of examples (default: 3)")
  renamed(p, "--n", "--num-examples", "n", type=positive_int)
  p.add_argument("--seed", type=int, default=0, help="seed of the negatives drawn")
  p.add_argument("--max-length", type=int, default=512, help="input length limit (default: 512)")
  p.add_argument("--gin_file", "--gin-file", action="append", default=[], metavar="PATH",
                 help="gin file(s) binding data paths (and --gin.NAME=VALUE bindings, as in train)")
  p.set_defaults(func=run, accepts_extra=True)


def run(args: argparse.Namespace) -> int:
  import gin
  import seqio

  import t5rank.tasks  # noqa: F401  (registers the tasks)
  from t5rank.data.preprocessors import features_vocabulary
  from t5rank.data.seqio_tasks import task_target_words
  from t5rank.data.span_corruption import random_spans_helper

  from t5rank.training.gin_config import gin_bindings

  gin.parse_config_files_and_bindings(args.gin_file, gin_bindings(args.extra))
  task = seqio.get_mixture_or_task(args.name)
  if args.split not in task.splits:
    raise SystemExit(f"{args.name} has no split {args.split!r}; it has {list(task.splits)}")
  vocab = features_vocabulary(task.output_features)
  if task_target_words(args.name) is None:  # pre-training: span corruption
    lengths = {"inputs": args.max_length, "targets": random_spans_helper(args.max_length)[1]}
    dataset = task.get_dataset(lengths, split=args.split, shuffle=False, seed=args.seed)
    for i, ex in enumerate(dataset.take(args.n).as_numpy_iterator()):
      print(f"--- example {i}")
      for feature in ("inputs", "targets"):
        ids = [int(t) for t in ex[feature]]
        print(f"{feature} ({len(ids)} ids): {vocab.decode(ids)}")
    return 0
  dataset = task.get_dataset({"inputs": args.max_length, "targets": 2}, split=args.split,
                             shuffle=False, seed=args.seed)
  for i, ex in enumerate(dataset.take(args.n).as_numpy_iterator()):
    print(f"--- example {i} (label {ex['label']})")
    print(f"inputs text:  {ex['inputs_pretokenized'].decode()}")
    print(f"targets text: {ex['targets_pretokenized'].decode()}")
    for feature in ("inputs", "targets"):
      ids = [int(t) for t in ex[feature]]
      print(f"{feature} ({len(ids)} ids): {ids}")
      print(f"{feature} pieces: {[vocab.id_to_piece(t) for t in ids]}")
  return 0
