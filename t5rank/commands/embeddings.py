"""`t5rank embeddings`: a word vocabulary and word2vec vectors learned on a collection, for TK.

    t5rank embeddings --output runs/words_iqa                    # InsuranceQA (English), default
    t5rank embeddings --corpus corpus.jsonl --queries train_queries.tsv --output runs/words

Texts: by default InsuranceQA v2's 27,413 answers and its training questions (never the validation
or test questions); or a corpus file (TSV id<TAB>text[<TAB>title] or JSONL) and optionally a
queries file. The vocabulary keeps the words occurring at least --min-count times (the TK paper:
5); the vectors are gensim's word2vec (skip-gram, negative sampling), --dim dimensions (the paper's
GloVe: 300), one worker so that a seed gives the same vectors. The directory holds words.tsv,
vectors.npy and embeddings.json; a TK model is built on it (gin: `tk.tk_config.words = DIR`) and
starts from its vectors with `trainer.Init.checkpoint = DIR` (or from random vectors with None).
"""

from __future__ import annotations

import argparse

from t5rank.commands import add_overwrite, positive_int


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("embeddings", help="learn a word vocabulary and word2vec vectors on a "
                            "collection (TK's word embeddings)", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("-o", "--output", required=True, help="directory to write (new, empty, or an earlier "
                                                 "output of this command with --overwrite)")
  p.add_argument("--corpus", help="corpus file instead of InsuranceQA (TSV or JSONL)")
  p.add_argument("--queries", help="queries file whose texts are added (with --corpus)")
  p.add_argument("--language", default="en", choices=("en", "zh"),
                 help="InsuranceQA's language (default en)")
  p.add_argument("--min-count", type=positive_int, default=5,
                 help="keep words occurring at least this often (default 5)")
  p.add_argument("--dim", type=positive_int, default=300, help="vector size (default 300)")
  p.add_argument("--epochs", type=positive_int, default=5, help="word2vec epochs (default 5)")
  p.add_argument("--seed", type=int, default=0, help="word2vec seed (default 0)")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`."""
  from t5rank.files import DIRECTORY, Output, holds

  return ([Output("--output", args.output, DIRECTORY, holds("embeddings.json"))],
          {"--corpus": args.corpus, "--queries": args.queries})


def run(args: argparse.Namespace) -> int:
  import time

  from t5rank.data.readers import document_text, read_corpus, read_queries
  from t5rank.data.word_embeddings import collection_texts, make_embeddings

  if args.queries and not args.corpus:
    raise SystemExit("t5rank embeddings: --queries adds to a --corpus; without --corpus the texts "
                     "are InsuranceQA's")
  start = time.perf_counter()
  if args.corpus:
    texts = [document_text(d) for d in read_corpus(args.corpus).values()]
    texts += list(read_queries(args.queries).values()) if args.queries else []
    source = f"{args.corpus}" + (f" + {args.queries}" if args.queries else "")
  else:
    texts = collection_texts(args.language)
    source = f"insuranceqa train ({args.language}): answers + training questions"
  make_embeddings(args.output, texts, min_count=args.min_count, dim=args.dim, epochs=args.epochs,
                  seed=args.seed, source=source)
  print(f"wrote {args.output} in {time.perf_counter() - start:.0f} s")
  return 0
