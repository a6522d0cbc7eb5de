"""`t5rank index`: encode a corpus into a dense index (`t5rank.retrieval.dense`)."""

from __future__ import annotations

import argparse
import os
import time

from t5rank.commands import add_overwrite, positive_int

# faiss's HNSW crashes with M = 1 and allocates M links per node and level: past a few hundred the
# graph only costs memory (its authors use 4 to 64)
MAX_HNSW_LINKS = 256


def add_parser(subparsers) -> None:
  p = subparsers.add_parser(
      "index", help="encode a corpus into a dense index for `t5rank retrieve --dense`",
      description="Encodes every document of a corpus with a dense encoder into unit vectors and "
                  "writes an index directory (vectors, document ids, the encoder's fingerprint; "
                  "optionally an HNSW graph). Shards are saved under OUTPUT.partial as they "
                  "finish: rerunning an interrupted command resumes there. The encoder is a dual "
                  "encoder checkpoint (t5rank train with gin/runs/dual_encoder.gin), a `t5rank "
                  "embeddings` directory (averaged word vectors, --weighting idf for the "
                  "IDF-weighted average) or a T5 checkpoint (mean-pooled encoder). See "
                  "docs/dense_retrieval.md.")
  p.add_argument("--encoder", required=True, help="dual encoder checkpoint, embeddings directory "
                                                  "or T5 checkpoint (each may be shipped:NAME, "
                                                  "a model t5rank ships)")
  p.add_argument("--corpus", required=True, help="corpus, JSONL or TSV (see t5rank.data.readers)")
  p.add_argument("-o", "--output", required=True, help="index directory to write")
  p.add_argument("--weighting", choices=("uniform", "idf"), default="uniform",
                 help="averaged word vectors: uniform or IDF-weighted by the corpus (default "
                      "uniform)")
  p.add_argument("--shard-size", type=positive_int, default=8192,
                 help="documents per saved shard (default 8192)")
  p.add_argument("--hnsw", type=hnsw_links, default=0, metavar="M",
                 help="also build a faiss HNSW graph with M links per node (2 to "
                      f"{MAX_HNSW_LINKS}, e.g. 32; default: none, built on first use by --search "
                      "hnsw)")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def hnsw_links(text: str) -> int:
  """argparse type of --hnsw: 0 (no graph) or M in 2..MAX_HNSW_LINKS."""
  try:
    value = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
  if value != 0 and not 2 <= value <= MAX_HNSW_LINKS:
    raise argparse.ArgumentTypeError(f"expected 0 (no graph) or M from 2 to {MAX_HNSW_LINKS}, got "
                                     f"{value}")
  return value


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`: the index directory and its resumable
  shards (OUTPUT.partial)."""
  from t5rank.files import DIRECTORY, WORK, Output, holds
  from t5rank.retrieval.dense import INDEX_FILE, SHARDS_MANIFEST

  return ([Output("--output", args.output, DIRECTORY, holds(INDEX_FILE)),
           Output("the resumable shards", _work_dir(args.output), WORK, holds(SHARDS_MANIFEST))],
          {"--corpus": args.corpus, "--encoder": _encoder(args.encoder)})


def _encoder(encoder: str) -> str:
  """The encoder's path (`shipped:NAME`: a model t5rank ships)."""
  from t5rank.checkpoints.locate import local_path
  try:
    return local_path(encoder)
  except ValueError as e:
    raise SystemExit(f"t5rank index: {e}") from None


def _work_dir(output: str) -> str:
  return os.path.abspath(output).rstrip(os.sep) + ".partial"


def run(args: argparse.Namespace) -> int:
  import shutil

  from t5rank.data.readers import check_run_id, read_corpus
  from t5rank.retrieval.dense import DenseRetriever

  start = time.perf_counter()
  try:
    corpus = read_corpus(args.corpus)
    for docid in corpus:
      check_run_id(docid, "document", args.corpus)
  except ValueError as e:
    raise SystemExit(f"t5rank index: {e}") from None
  work_dir = _work_dir(args.output)
  try:
    retriever = DenseRetriever.build(corpus, encoder_path=_encoder(args.encoder),
                                     weighting=args.weighting,
                                     work_dir=work_dir, shard_size=args.shard_size,
                                     hnsw_m=args.hnsw)
  except (ValueError, FileNotFoundError) as e:
    raise SystemExit(f"t5rank index: {e}") from None
  retriever.save(args.output)
  shutil.rmtree(work_dir)
  seconds = time.perf_counter() - start
  print(f"{len(corpus)} documents, {retriever.encoder.dim}-d ({type(retriever.encoder).__name__}, "
        f"{args.weighting}) in {seconds:.1f}s ({len(corpus) / max(seconds, 1e-9):.0f} docs/s); "
        f"wrote {args.output}")
  return 0
