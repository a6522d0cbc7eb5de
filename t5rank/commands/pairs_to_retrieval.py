"""`t5rank pairs-to-retrieval`: a retrieval task (queries, corpus, qrels) from a pairwise data set,
by the transitive closure of its positive pairs; the method is in `t5rank.data.retrieval_task`."""

from __future__ import annotations

import argparse
import json
import os

from t5rank.commands import add_overwrite

TASK_FILE = "retrieval_task.json"  # what the directory was built from, and how


def add_parser(subparsers) -> None:
  from t5rank.data import retrieval_task
  p = subparsers.add_parser(
      "pairs-to-retrieval", help="build a retrieval task from labelled pairs (transitive closure)",
      description=retrieval_task.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--pairs", required=True, help="TSV id1<TAB>id2[<TAB>label] (label 0: negative)")
  p.add_argument("--texts", required=True, help="every item's text: TSV id<TAB>text or JSONL "
                                                "(all of them become the candidates)")
  p.add_argument("-o", "--output", required=True, help="directory for queries.tsv, corpus.jsonl and "
                                                 "qrels.txt")
  p.add_argument("--exclude-self", action="store_true",
                 help="the query's own item is not among its relevant results")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`."""
  from t5rank.files import DIRECTORY, Output, holds

  return ([Output("--output", args.output, DIRECTORY, holds(TASK_FILE))],
          {"--pairs": args.pairs, "--texts": args.texts})


def run(args: argparse.Namespace) -> int:
  from t5rank.data.readers import check_run_id, document_text, read_corpus
  from t5rank.data.retrieval_task import check_items, closure_qrels, read_pairs
  from t5rank.files import atomic_directory

  try:
    texts = read_corpus(args.texts)
    for item in texts:
      check_run_id(item, "item", args.texts)
    qrels = closure_qrels(read_pairs(args.pairs), self_relevant=not args.exclude_self)
    check_items(qrels, texts, args.texts)
  except (ValueError, FileNotFoundError) as e:
    raise SystemExit(f"t5rank pairs-to-retrieval: {e}") from None
  with atomic_directory(args.output) as directory:
    with open(os.path.join(directory, "queries.tsv"), "w", encoding="utf-8") as f:
      f.writelines(f"{q}\t{' '.join(document_text(texts[q]).split())}\n" for q in qrels)
    with open(os.path.join(directory, "corpus.jsonl"), "w", encoding="utf-8") as f:
      f.writelines(json.dumps({"id": i, "text": document_text(d)}, ensure_ascii=False) + "\n"
                   for i, d in texts.items())
    with open(os.path.join(directory, "qrels.txt"), "w", encoding="utf-8") as f:
      f.writelines(f"{q} 0 {d} 1\n" for q, docs in qrels.items() for d in docs)
    with open(os.path.join(directory, TASK_FILE), "w", encoding="utf-8") as f:
      json.dump({"pairs": os.path.abspath(args.pairs), "texts": os.path.abspath(args.texts),
                 "exclude_self": args.exclude_self, "queries": len(qrels),
                 "candidates": len(texts)}, f, indent=1)
  relevant = sum(len(d) for d in qrels.values()) / max(len(qrels), 1)
  print(f"{len(qrels)} queries, {len(texts)} candidates, {relevant:.2f} relevant per query; "
        f"wrote {args.output}")
  return 0
