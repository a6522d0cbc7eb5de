"""Full-collection retrieval on InsuranceQA v2 (BENCHMARKS.md, "Dense retrieval"): every one of the
27,413 answers a candidate for each question of a split; TF-IDF, BM25, averaged and IDF-weighted
word2vec, and each dense encoder given, all through the `t5rank` commands; then MAP@100, MRR,
MRR@10, recall@100 and @1000 with paired t-tests against BM25, ANN recall against exhaustive search,
and the hybrid of BM25 and the first dense encoder (`t5rank fuse --union`, its weight tuned on the
validation split's runs, which this script makes first).

    python benchmarks/dense_retrieval.py --out /tmp/dense \
        --encoder de=/tmp/de_s0/best --encoder de_s1=/tmp/de_s1/best ...

Writes OUT/{validation,test}/<name>.run, OUT/report.txt and OUT/report.json; prints the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import time

METRICS = "MAP@100,MRR,MRR@10,recall@100,recall@1000"


def cli(*argv: str) -> str:
  """Runs `t5rank argv`, returns its standard output (raises on failure). The benchmark rewrites
  its own runs on every call (--overwrite)."""
  from t5rank import cli as t5rank_cli
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    status = t5rank_cli.main(list(argv))
  if status:
    raise SystemExit(f"t5rank {argv[0]} failed ({status})")
  return out.getvalue()


def rerank(checkpoint: str, files: dict, out: str, runs: dict, names: list, report: dict) -> str:
  """Each run of `names` cut to its top 100, its candidates given their BM25 scores (`t5rank
  retrieve --candidates`: the demo's monoT5 reads the BM25 score from the candidates run, and a
  dense run's scores are cosines), then reranked by `checkpoint` (whole answers); the evaluation of
  the reranked runs, the cut runs and the cut runs in BM25 order."""
  from t5rank.data.readers import read_run, write_run

  reranked, tops, bm25_order = [], [], []
  for name in names:
    top = os.path.join(out, f"{name}_top100.run")
    write_run(top, {q: c[:100] for q, c in read_run(runs[name]).items()}, tag=name)
    scored = os.path.join(out, f"{name}_top100_bm25scores.run")
    cli("retrieve", "--corpus", files["corpus.jsonl"], "--queries", files["queries.tsv"],
        "--candidates", top, "--output", scored, "--overwrite")
    path = os.path.join(out, f"{name}_top100_bm25scores_monot5.run")
    start = time.perf_counter()
    cli("score", "--checkpoint", checkpoint, "--queries", files["queries.tsv"], "--corpus",
        files["corpus.jsonl"], "--run", scored, "--output", path, "--window", "0", "--overwrite")
    report["timings"][f"rerank/{name}"] = {"seconds": time.perf_counter() - start}
    reranked.append(path)
    tops.append(top)
    bm25_order.append(scored)
  return cli("evaluate", "--qrels", files["qrels.txt"], "--metrics", METRICS,
             *reranked, *tops, *bm25_order[1:])


def ann_report(qrels_path: str, runs: dict, name: str) -> str:
  """HNSW and faiss flat against exact search: their Recall@100 as a share of exact search's, and
  the mean overlap of each query's top 100 with exact search's (neighbour recall)."""
  from t5rank.data.readers import read_qrels, read_run
  from t5rank.evaluation.metrics import per_query

  qrels = read_qrels(qrels_path)
  exact = read_run(runs[name])
  exact_recall = per_query(qrels, exact, ["recall@100"])["recall@100"].mean()
  lines = []
  for kind in ("flat", "hnsw"):
    other = read_run(runs[f"{name}_{kind}"])
    recall = per_query(qrels, other, ["recall@100"])["recall@100"].mean()
    overlap = sum(len({d for d, _ in exact[q][:100]} & {d for d, _ in other[q][:100]})
                  for q in exact) / (100 * len(exact))
    lines.append(f"{kind}: Recall@100 {recall:.4f} = {recall / exact_recall:.4f} of exact "
                 f"({exact_recall:.4f}); top-100 overlap with exact {overlap:.4f}")
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--out", required=True)
  parser.add_argument("--encoder", action="append", default=[], metavar="NAME=PATH",
                      help="a dense encoder (dual encoder or T5 checkpoint); the first is fused")
  parser.add_argument("--embeddings", default="runs/words_insuranceqa_en_300d",
                      help="word2vec directory of the averaged-embedding baselines")
  parser.add_argument("--splits", default="validation,test")
  parser.add_argument("--rerank", metavar="CKPT",
                      help="a reranker checkpoint (the demo's monoT5): on the test split, rerank "
                           "the top 100 of BM25, of the first encoder and of the hybrid with it")
  args = parser.parse_args()
  from t5rank.data.insuranceqa import export_insuranceqa
  from t5rank.data.word_embeddings import insuranceqa_embeddings

  if args.embeddings == "runs/words_insuranceqa_en_300d":
    insuranceqa_embeddings(dim=300)
  encoders = [tuple(e.split("=", 1)) for e in args.encoder]
  report: dict = {"timings": {}, "tables": {}}
  for split in args.splits.split(","):
    out = os.path.join(args.out, split)
    files = export_insuranceqa(os.path.join(out, "data"), split)
    runs = {}

    def retrieve(name: str, *flags: str) -> None:
      path = os.path.join(out, f"{name}.run")
      start = time.perf_counter()
      line = cli("retrieve", "--queries", files["queries.tsv"], "--output", path, "--depth", "1000",
                 "--overwrite", *flags).strip()
      report["timings"][f"{split}/{name}"] = {"seconds": time.perf_counter() - start, "log": line}
      print(f"{split} {name}: {line}", flush=True)
      runs[name] = path

    def index(name: str, encoder: str, *flags: str) -> str:
      path = os.path.join(args.out, "indexes", name)
      if not os.path.exists(os.path.join(path, "index.json")):
        start = time.perf_counter()
        line = cli("index", "--encoder", encoder, "--corpus", files["corpus.jsonl"], "--output",
                   path, *flags).strip()
        report["timings"][f"index/{name}"] = {"seconds": time.perf_counter() - start,
                                              "log": line}
        print(f"index {name}: {line}", flush=True)
      return path

    retrieve("bm25", "--corpus", files["corpus.jsonl"])
    retrieve("tfidf", "--tfidf", "--corpus", files["corpus.jsonl"])
    retrieve("w2v_avg", "--dense", index("w2v_avg", args.embeddings))
    retrieve("w2v_idf", "--dense", index("w2v_idf", args.embeddings, "--weighting", "idf"))
    for name, path in encoders:
      dense = index(name, path, "--hnsw", "32")
      retrieve(name, "--dense", dense)
      if name == encoders[0][0]:
        retrieve(f"{name}_flat", "--dense", dense, "--search", "flat")
        retrieve(f"{name}_hnsw", "--dense", dense, "--search", "hnsw")
    if encoders and split == "test":
      first = encoders[0][0]
      valid = os.path.join(args.out, "validation")
      line = cli("fuse", runs["bm25"], runs[first], "--union", "--metric", "MAP@100", "--tune",
                 os.path.join(valid, "data", "qrels.txt"), os.path.join(valid, "bm25.run"),
                 os.path.join(valid, f"{first}.run"), "-o", os.path.join(out, "hybrid.run"),
                 "--overwrite")
      print(line, flush=True)
      report["fusion"] = line
      runs["hybrid"] = os.path.join(out, "hybrid.run")
    order = ["bm25"] + [n for n in runs if n != "bm25"]
    table = cli("evaluate", "--qrels", files["qrels.txt"], "--metrics", METRICS,
                *[runs[n] for n in order])
    print(table, flush=True)
    report["tables"][split] = table
    if args.rerank and encoders and split == "test":
      report["tables"]["test/rerank"] = rerank(args.rerank, files, out, runs,
                                               ["bm25", encoders[0][0], "hybrid"], report)
      print(report["tables"]["test/rerank"], flush=True)
    if encoders:
      report["tables"][f"{split}/ann"] = ann_report(files["qrels.txt"], runs, encoders[0][0])
      print(report["tables"][f"{split}/ann"], flush=True)
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, "report.json"), "w") as f:
    json.dump(report, f, indent=1)
  with open(os.path.join(args.out, "report.txt"), "w") as f:
    f.write("\n\n".join(report["tables"].values()))


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  main()
