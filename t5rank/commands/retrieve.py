"""`t5rank retrieve`: first-stage retrieval to a TREC run: BM25 or BM25+RM3 (`t5rank.retrieval.bm25`),
TF-IDF (`t5rank.retrieval.tfidf`) or dense search over a `t5rank index` (`t5rank.retrieval.dense`)."""

from __future__ import annotations

import argparse

import logging
import time

from t5rank.commands import add_overwrite, positive_int, renamed
from t5rank.data.analysis import LANGUAGES
from t5rank.retrieval.bm25 import BM25, KEY_FILE, RM3


def add_parser(subparsers) -> None:
  p = subparsers.add_parser(
      "retrieve", help="BM25, TF-IDF or dense first-stage retrieval to a TREC run",
      description="BM25 (bm25s, Lucene variant), BM25+RM3, TF-IDF (--tfidf) or dense (--dense "
                  "INDEX, an index of `t5rank index`) retrieval of the top k documents per query, "
                  "written as a TREC run. See docs/retrieval_evaluation.md and "
                  "docs/dense_retrieval.md.")
  p.add_argument("--corpus", help="corpus, JSONL or TSV (see t5rank.data.readers); required "
                                  "except with --dense")
  p.add_argument("--queries", required=True, help="queries, TSV or JSONL")
  p.add_argument("-o", "--output", required=True, help="TREC run to write")
  p.add_argument("--index", help="directory to save the index to and reuse it from")
  p.add_argument("--depth", type=positive_int, default=1000, metavar="N",
                 help="documents per query (default 1000)")
  renamed(p, "--k", "--depth", "depth", type=positive_int)
  p.add_argument("--k1", type=float, default=0.9, help="BM25 k1 (default 0.9, Anserini's)")
  p.add_argument("--b", type=float, default=0.4, help="BM25 b (default 0.4, Anserini's)")
  p.add_argument("--language", choices=LANGUAGES, default="en",
                 help="BM25's analyzer: en: Porter stemming and stopwords; zh: character bigrams; "
                      "zh-jieba: jieba words (default en)")
  renamed(p, "--analyzer", "--language", "language", choices=LANGUAGES)
  p.add_argument("--candidates", help="a TREC run: rerank each query's candidates instead of "
                                      "searching the whole corpus")
  method = p.add_mutually_exclusive_group()
  method.add_argument("--rm3", action="store_true", help="BM25+RM3 query expansion")
  method.add_argument("--tfidf", action="store_true", help="TF-IDF cosine instead of BM25")
  method.add_argument("--dense", metavar="INDEX", help="dense search over this `t5rank index` "
                                                       "directory instead of BM25")
  p.add_argument("--encoder", help="with --dense: the query encoder (default: the one the index "
                                   "records; another encoder is refused)")
  p.add_argument("--search", choices=("exact", "flat", "hnsw"), default="exact",
                 help="with --dense: exact (matrix product on the device), flat (faiss "
                      "IndexFlatIP) or hnsw (faiss HNSW, approximate) (default exact)")
  p.add_argument("--ef-search", type=positive_int, default=128,
                 help="with --search hnsw: HNSW's efSearch, raised to k when smaller (default "
                      "128; with the default k 1000, efSearch is 1000)")
  p.add_argument("--fb-docs", type=positive_int, default=RM3.fb_docs, help="RM3 feedback documents (10)")
  p.add_argument("--fb-terms", type=positive_int, default=RM3.fb_terms, help="RM3 feedback terms (10)")
  p.add_argument("--original-weight", type=float, default=RM3.original_weight,
                 help="RM3 weight of the original query (0.5)")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`: the run, and --index, a BM25 index this
  command reuses or (re)builds there."""
  from t5rank.files import WORK, Output, holds

  return ([Output("--output", args.output), Output("--index", args.index, WORK, holds(KEY_FILE))],
          {"--corpus": args.corpus, "--queries": args.queries, "--candidates": args.candidates,
           "--dense": args.dense, "--encoder": args.encoder})


def run(args: argparse.Namespace) -> int:
  from t5rank.data.readers import check_run_id, read_corpus, read_queries, read_run, write_run

  if not args.dense and not args.corpus:
    raise SystemExit("t5rank retrieve: --corpus is required (except with --dense INDEX)")
  if (args.encoder or args.search != "exact" or args.ef_search != 128) and not args.dense:
    raise SystemExit("t5rank retrieve: --encoder, --search and --ef-search are options of --dense")
  logging.basicConfig(level=logging.INFO, format="%(message)s")
  start = time.perf_counter()
  try:
    corpus = read_corpus(args.corpus) if args.corpus else None
    queries = read_queries(args.queries)
    candidates = read_run(args.candidates) if args.candidates else None
    for docid in corpus or ():  # before indexing: such an id would make a run nobody can read
      check_run_id(docid, "document", args.corpus)
    for qid in queries:
      check_run_id(qid, "query", args.queries)
    retriever, size = _retriever(args, corpus)
  except (ValueError, FileNotFoundError) as e:
    raise SystemExit(f"t5rank retrieve: {e}") from None
  indexed = time.perf_counter()
  try:
    result = retriever.retrieve(queries, k=args.depth, candidates=candidates)
  except ValueError as e:
    source = f"{args.candidates}: " if candidates is not None else ""
    raise SystemExit(f"t5rank retrieve: {source}{e}") from None
  seconds = time.perf_counter() - indexed
  write_run(args.output, result, tag=retriever.name)
  print(f"{len(result)} queries, {size}; index {indexed - start:.1f}s, retrieval {seconds:.1f}s "
        f"({len(queries) / max(seconds, 1e-9):.0f} queries/s); wrote {args.output}")
  return 0


def _retriever(args: argparse.Namespace, corpus):
  """(the retriever the flags ask for, a phrase on its index's size)."""
  if args.dense:
    from t5rank.retrieval.dense import DenseRetriever
    retriever = DenseRetriever.load(args.dense, encoder_path=args.encoder)
    retriever.search, retriever.ef_search = args.search, args.ef_search
    return retriever, (f"{len(retriever.docids)} documents ({retriever.encoder.dim}-d, "
                       f"{args.search} search)")
  if args.tfidf:
    from t5rank.retrieval.tfidf import TfIdf
    retriever = TfIdf.build(corpus)
    return retriever, f"{len(corpus)} documents, {retriever.matrix.shape[1]} terms (TF-IDF)"
  rm3 = RM3(args.fb_docs, args.fb_terms, args.original_weight) if args.rm3 else None
  retriever = BM25.open(corpus, args.index, k1=args.k1, b=args.b, language=args.language, rm3=rm3)
  return retriever, f"{len(corpus)} documents, {len(retriever.index.vocab)} terms"
