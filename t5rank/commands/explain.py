"""`t5rank explain`: why TK scores documents as it does, as an HTML page and a PNG (the TK paper's
Figure 2): documents side by side, each word coloured by the kernel it falls in most strongly, and
per kernel the pooled scores s_log^k and s_len^k (and weighted by W1, W2), then s_log, s_len and s.

    t5rank explain --checkpoint runs/tk/best --query "what does life insurance cover" \\
        --document "Life insurance pays ..." --document "An annuity is ..." --output why.html
    t5rank explain --checkpoint runs/tk/best --queries queries.tsv --corpus corpus.jsonl \\
        --run tk.run --qid 1234 --top 2 --output why.html

Writes OUTPUT (.html) and OUTPUT with .png in place of .html (or --png PATH). Only TK checkpoints
can be explained this way; an ensemble is explained by its first member.
"""

from __future__ import annotations

import argparse
import os

from t5rank.commands import add_overwrite, checkpoint_path, positive_int, renamed, resolved


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("explain", help="explain TK's scores of documents for a query (HTML "
                            "and PNG, the TK paper's Figure 2)", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--checkpoint", required=True, help="a TK checkpoint")
  p.add_argument("--query", help="the query text (with --document)")
  p.add_argument("--document", action="append", default=[],
                 help="a document text; give it once per document (two for a comparison)")
  p.add_argument("--queries", help="queries file (with --corpus, --run and --qid)")
  p.add_argument("--corpus", help="corpus file")
  p.add_argument("--run", help="a run; the query's top --top documents are explained")
  p.add_argument("--qid", help="the query id in --queries and --run")
  p.add_argument("--depth", type=positive_int, default=2, metavar="N",
                 help="the run's top N documents are explained (default 2)")
  renamed(p, "--top", "--depth", "depth", type=positive_int)
  p.add_argument("-o", "--output", required=True, help="the HTML page to write")
  p.add_argument("--png", help="the PNG to write (default: OUTPUT with .png)")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def _png(args: argparse.Namespace) -> str:
  return args.png or os.path.splitext(args.output)[0] + ".png"


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`."""
  from t5rank.files import Output

  return ([Output("--output", args.output), Output("--png", _png(args))],
          {"--checkpoint": checkpoint_path(args), "--queries": args.queries, "--corpus": args.corpus,
           "--run": args.run})


def _inputs(args: argparse.Namespace) -> tuple[str, list[tuple[str, str]]]:
  """(query, [(docid, text)]) from the flags."""
  if args.query is not None:
    if not args.document or any((args.queries, args.corpus, args.run, args.qid)):
      raise SystemExit("t5rank explain: give --query with one or more --document, or --queries, "
                       "--corpus, --run and --qid")
    return args.query, [(f"document {i + 1}", text) for i, text in enumerate(args.document)]
  if not all((args.queries, args.corpus, args.run, args.qid)) or args.document:
    raise SystemExit("t5rank explain: give --query with --document, or all of --queries, "
                     "--corpus, --run and --qid")
  from t5rank.data.readers import document_text, read_corpus, read_queries, read_run

  queries = read_queries(args.queries)
  run = read_run(args.run)
  if args.qid not in queries or args.qid not in run:
    raise SystemExit(f"t5rank explain: query {args.qid!r} is not in both {args.queries} and "
                     f"{args.run}")
  corpus = read_corpus(args.corpus)
  ranked = sorted(run[args.qid], key=lambda kv: (-kv[1], kv[0]))[:args.depth]  # [(docid, score)]
  missing = [docid for docid, _ in ranked if docid not in corpus]
  if missing:
    raise SystemExit(f"t5rank explain: {args.corpus} has no document {missing[0]!r} of the run")
  return queries[args.qid], [(docid, document_text(corpus[docid])) for docid, _ in ranked]


def run(args: argparse.Namespace) -> int:
  from t5rank.models import registry
  from t5rank.models.loading import load_reranker

  png = _png(args)
  query, documents = _inputs(args)
  reranker, params = load_reranker(resolved(args))
  family = registry.get(reranker.name)
  if family.explain is None:
    explainable = [f.name for f in registry.families() if f.explain]
    raise SystemExit(f"t5rank explain: {args.checkpoint} is a {reranker.name} checkpoint; "
                     f"explanations are of {', '.join(explainable)} models")
  for line in family.part("explain")(reranker, params, query, documents, args.output, png):
    print(line)
  print(f"wrote {args.output} and {png}")
  return 0
