"""A trained model against BM25 on the same InsuranceQA validation queries (pool reranking).

  .venv/bin/python benchmarks/bm25_insuranceqa.py --split validation      # writes the BM25 run
  .venv/bin/python benchmarks/rerank_insuranceqa_valid.py MODEL_DIR [--num_queries 200]

Scores the pools (relevant answers + 200 retrieved negatives) of the first N validation queries with
the model of MODEL_DIR (`final/` if training finished, else its latest checkpoint) through
`t5rank.training.rerank_eval.RerankEval`, and prints MRR@10, MRR and P@1 of the model and of BM25 (from the
run file) on the same queries. The pairs are tokenized with `--vocabulary`, by default the one
`final/` carries, else T5's (give it for a run that has not finished on another vocabulary); each
input carries the pair's BM25 score when `final/`'s metadata says `bm25_in_input` (or with
`--bm25_in_input`).
"""

from __future__ import annotations

import argparse
import os
import time



def load_params(model_dir: str):
  """(config, params) of `final/` or of the latest trainer checkpoint in `model_dir`."""
  from t5rank.models.config import T5Config
  from t5rank.models.t5_weights import load_checkpoint

  final = os.path.join(model_dir, "final")
  if os.path.isdir(final):
    return load_checkpoint(final)
  import orbax.checkpoint as ocp
  steps = sorted(int(s) for s in os.listdir(os.path.join(model_dir, "checkpoints")) if s.isdigit())
  path = os.path.join(os.path.abspath(model_dir), "checkpoints", str(steps[-1]), "state")
  print(f"checkpoint step {steps[-1]}")
  with open(os.path.join(model_dir, "config.json")) as f:
    config = T5Config.from_json(f.read())
  return config, ocp.StandardCheckpointer().restore(path)["params"]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("model_dir")
  parser.add_argument("--num_queries", type=int, default=200)
  parser.add_argument("--max_length", type=int, default=512)
  parser.add_argument("--bm25_run", default="/tmp/t5rank_iqa_validation_en/pool_bm25.run")
  parser.add_argument("--vocabulary", help="a vocabulary name (t5, insuranceqa_en_8k) or a "
                      "SentencePiece file (default: the one final/ carries, else t5)")
  parser.add_argument("--bm25_in_input", action="store_true",
                      help="write each pair's BM25 score into the input (default: as final/ says)")
  args = parser.parse_args()

  from t5rank.data.readers import read_run
  from t5rank.evaluation.metrics import per_query
  from t5rank.models.loading import load_reranker
  from t5rank.training.rerank_eval import METRICS, RerankEval

  config, params = load_params(args.model_dir)
  final = os.path.join(args.model_dir, "final")
  stored = load_reranker(final)[0] if os.path.isdir(final) else None
  vocabulary = args.vocabulary or (stored.vocab.path if stored else "t5")
  bm25_in_input = args.bm25_in_input or bool(stored and stored.bm25_in_input)
  evaluator = RerankEval("validation", args.num_queries, max_length=args.max_length,
                         vocabulary=vocabulary, bm25_in_input=bm25_in_input)
  start = time.perf_counter()
  model = evaluator(params, config)
  seconds = time.perf_counter() - start
  run = read_run(args.bm25_run)
  bm25_run = {qid: [(a, dict(run[qid]).get(a, -1e9)) for a, _ in docs]
              for qid, docs in _pool_run(evaluator).items()}
  values = per_query(evaluator.qrels, bm25_run, list(METRICS.values()))
  bm25 = {name: float(values[metric].mean()) for name, metric in METRICS.items()}
  print(f"{len(evaluator.qrels)} queries, {len(evaluator.pairs)} pairs scored in {seconds:.0f}s")
  print("| method | MRR@10 | MRR | P@1 |\n| --- | --- | --- | --- |")
  for name, m in (("BM25", bm25), (f"model ({args.model_dir})", model)):
    print(f"| {name} | {m['mrr@10']:.3f} | {m['mrr']:.3f} | {m['p@1']:.3f} |")


def _pool_run(evaluator) -> dict[str, list[tuple[str, float]]]:
  run: dict[str, list[tuple[str, float]]] = {}
  for qid, aid in evaluator.pairs:
    run.setdefault(qid, []).append((aid, 0.0))
  return run

if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  main()
