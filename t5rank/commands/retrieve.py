"""`t5rank retrieve`: first-stage retrieval (BM25, BM25+RM3) to a TREC run; the method is in `t5rank.retrieval.bm25`."""

from __future__ import annotations

import argparse

import logging
import time

from t5rank.commands import positive_int, refuse_overwriting_inputs
from t5rank.retrieval.bm25 import BM25, LANGUAGES, RM3


def add_parser(subparsers) -> None:
  p = subparsers.add_parser(
      "retrieve", help="BM25 / BM25+RM3 first-stage retrieval to a TREC run",
      description="BM25 (bm25s, Lucene variant) or BM25+RM3 retrieval of the top k documents per "
                  "query, written as a TREC run. See docs/retrieval_evaluation.md.")
  p.add_argument("--corpus", required=True, help="corpus, JSONL or TSV (see t5rank.data.readers)")
  p.add_argument("--queries", required=True, help="queries, TSV or JSONL")
  p.add_argument("--output", required=True, help="TREC run to write")
  p.add_argument("--index", help="directory to save the index to and reuse it from")
  p.add_argument("--k", type=positive_int, default=1000, help="documents per query (default 1000)")
  p.add_argument("--k1", type=float, default=0.9, help="BM25 k1 (default 0.9, Anserini's)")
  p.add_argument("--b", type=float, default=0.4, help="BM25 b (default 0.4, Anserini's)")
  p.add_argument("--language", choices=LANGUAGES, default="en",
                 help="en: Porter stemming and stopwords; zh: character bigrams (default en)")
  p.add_argument("--candidates", help="a TREC run: rerank each query's candidates instead of "
                                      "searching the whole corpus")
  p.add_argument("--rm3", action="store_true", help="BM25+RM3 query expansion")
  p.add_argument("--fb-docs", type=positive_int, default=RM3.fb_docs, help="RM3 feedback documents (10)")
  p.add_argument("--fb-terms", type=positive_int, default=RM3.fb_terms, help="RM3 feedback terms (10)")
  p.add_argument("--original-weight", type=float, default=RM3.original_weight,
                 help="RM3 weight of the original query (0.5)")
  p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
  import bm25s  # sets its logger to DEBUG when imported
  from t5rank.data.readers import check_run_id, read_corpus, read_queries, read_run, write_run

  refuse_overwriting_inputs("retrieve", {"--output": args.output},
                            {"--corpus": args.corpus, "--queries": args.queries,
                             "--candidates": args.candidates, "--index": args.index})
  logging.basicConfig(level=logging.INFO, format="%(message)s")
  logging.getLogger(bm25s.__name__).setLevel(logging.WARNING)
  start = time.perf_counter()
  try:
    corpus = read_corpus(args.corpus)
    queries = read_queries(args.queries)
    candidates = read_run(args.candidates) if args.candidates else None
    for docid in corpus:  # before indexing: such an id would make a run nobody can read
      check_run_id(docid, "document", args.corpus)
    for qid in queries:
      check_run_id(qid, "query", args.queries)
  except ValueError as e:
    raise SystemExit(f"t5rank retrieve: {e}") from None
  rm3 = RM3(args.fb_docs, args.fb_terms, args.original_weight) if args.rm3 else None
  retriever = BM25.open(corpus, args.index, k1=args.k1, b=args.b, language=args.language, rm3=rm3)
  index = retriever.index
  indexed = time.perf_counter()
  result = retriever.retrieve(queries, k=args.k, candidates=candidates)
  write_run(args.output, result, tag=retriever.name)
  print(f"{len(result)} queries, {len(corpus)} documents, {len(index.vocab)} terms; index "
        f"{indexed - start:.1f}s, retrieval {time.perf_counter() - indexed:.1f}s; wrote {args.output}")
  return 0
