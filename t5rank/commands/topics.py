"""`t5rank topics`: one field of a TREC topics file (Robust04's `<top>` format) as a queries file.

    t5rank topics 04robust.topics --field title --output robust04.titles.tsv
    t5rank topics 04robust.topics --field description --output robust04.descriptions.tsv

Writes `number<TAB>text` lines (the queries format of `t5rank retrieve` and `t5rank score`) in the
file's order. The monoT5 paper's Robust04 runs retrieve with the titles (BM25) and rerank with the
descriptions (monoT5); both files share the topic numbers, so a run of one reranks with the other.
See docs/paper_experiments.md.
"""

from __future__ import annotations

import argparse

from t5rank.commands import add_overwrite

FIELDS = ("title", "description", "narrative")  # attributes of t5rank.data.readers.Topic


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("topics", help="write a TREC topics file's titles or descriptions as "
                            "a queries file", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("topics", help="TREC topics file (<top> <num> <title> <desc> <narr>), may be .gz")
  p.add_argument("--field", choices=FIELDS, required=True, help="which text to write")
  p.add_argument("-o", "--output", required=True, help="queries TSV to write (number<TAB>text)")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`."""
  from t5rank.files import Output

  return [Output("--output", args.output)], {"TOPICS": args.topics}


def run(args: argparse.Namespace) -> int:
  from t5rank.data.readers import InputFormatError, read_trec_topics
  from t5rank.files import atomic_write

  try:
    topics = read_trec_topics(args.topics)
  except InputFormatError as e:
    raise SystemExit(f"t5rank topics: {e}") from None
  texts = {number: getattr(topic, args.field) for number, topic in topics.items()}
  empty = [number for number, text in texts.items() if not text]
  if empty:
    raise SystemExit(f"t5rank topics: {len(empty)} topic(s) of {args.topics} have no {args.field}: "
                     f"{', '.join(empty[:5])}{', ...' if len(empty) > 5 else ''}")
  with atomic_write(args.output) as f:
    f.writelines(f"{number}\t{text}\n" for number, text in texts.items())
  print(f"wrote the {args.field}s of {len(texts)} topics to {args.output}")
  return 0
