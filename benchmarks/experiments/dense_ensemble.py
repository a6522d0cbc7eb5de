"""An ensemble of dual encoders as one dense index: each model's unit vectors side by side, over √n.

    python benchmarks/experiments/dense_ensemble.py --index runs/dense/indexes/de_s0 \
      --index .../de_s1 --queries runs/dense/validation/data/queries.tsv --output ensemble.run

For n `t5rank index` directories of the same corpus, a query's and a document's vectors are the
concatenations of their n unit vectors divided by √n, so the inner product is the mean of the n
models' cosines (the TUW19-p3 ensemble's mean of scores, here as one vector per text: one index, one
exhaustive or ANN search). Writes the top `--k` of each query as a TREC run; evaluate it with
`t5rank evaluate` (BENCHMARKS.md, "Dense retrieval").
"""

from __future__ import annotations

import argparse

import numpy as np

from t5rank.data.readers import read_queries, write_run
from t5rank.retrieval.dense import DenseRetriever, exact_top_k


def ensemble_vectors(retrievers: list[DenseRetriever], texts: list[str]
                     ) -> tuple[np.ndarray, np.ndarray]:
  """(query vectors of `texts`, document vectors), each the models' unit vectors side by side over
  √n; the retrievers must index the same documents in the same order."""
  docids = retrievers[0].docids
  for r in retrievers[1:]:
    if r.docids != docids:
      raise ValueError("the indexes hold different documents (or orders): build them on one corpus")
  scale = 1.0 / np.sqrt(len(retrievers))
  queries = np.concatenate([r.encoder.encode(texts, "query") for r in retrievers], axis=1)
  documents = np.concatenate([r.vectors for r in retrievers], axis=1)
  return (queries * scale).astype(np.float32), (documents * scale).astype(np.float32)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--index", action="append", required=True, help="a `t5rank index` "
                      "directory (repeat: two or more)")
  parser.add_argument("--queries", required=True, help="qid<TAB>question")
  parser.add_argument("--output", required=True, help="the run to write")
  parser.add_argument("--k", type=int, default=1000, help="documents per query")
  parser.add_argument("--tag", default="dense_ensemble")
  args = parser.parse_args()
  if len(args.index) < 2:
    parser.error("an ensemble needs two or more --index")
  retrievers = [DenseRetriever.load(path) for path in args.index]
  queries = read_queries(args.queries)
  qids = list(queries)
  query_vectors, document_vectors = ensemble_vectors(retrievers, [queries[q] for q in qids])
  scores, rows = exact_top_k(query_vectors, document_vectors, min(args.k, len(document_vectors)))
  docids = retrievers[0].docids
  run = {q: sorted(((docids[i], float(s)) for i, s in zip(r.tolist(), v.tolist())),
                   key=lambda h: (-h[1], h[0]))
         for q, v, r, vector in zip(qids, scores, rows, query_vectors) if np.abs(vector).sum() > 0}
  write_run(args.output, run, args.tag)
  print(f"{len(run)} queries, {len(docids)} documents, {len(retrievers)} models: {args.output}")


if __name__ == "__main__":
  main()
