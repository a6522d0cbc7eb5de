"""Teacher scores for distillation, computed once: a reranker (the teacher, e.g. `shipped:monot5`)
scores each InsuranceQA training question's relevant answers and a fixed sample of its pool's
non-relevant answers; students (TK, the dual encoder) then train on the teacher's score margins
(Margin-MSE, Hofstätter et al. 2020) without ever running it.

    InsuranceQA train split (never validation or test)
    ─► each question: its relevant answers + NEGATIVES non-relevant answers of its pool, drawn
       with SEED ─► candidates.run, BM25 (k1 0.9, b 0.4) scores (a teacher may read them)
    ─► the teacher scores every pair (`t5rank score`'s scorer: resumable shards) ─► scores.run;
       a fused teacher: each member scores them (members/NN.run; `bm25`: the BM25 scores) and
       scores.run is Σ wᵢ · zscore(memberᵢ) per question, as the cascade fuses
    ─► teacher.json: the teacher (checkpoint, its parameters' hash, its shipped recipe's hash),
       the split, NEGATIVES, SEED, pairs, time; the hash of scores.run

The directory (queries.tsv, corpus.jsonl, qrels.txt, candidates.run, scores.run, teacher.json) is
read by `t5rank.data.teacher.teacher_table` as triples that carry both teacher scores.
"""

from __future__ import annotations

import json
import os
import time
from typing import Optional, Sequence

from t5rank.data.teacher import CANDIDATES_FILE, SCORES_FILE, TEACHER_FILE
from t5rank.files import atomic_write, mark_owner, sha256_file

DEFAULT_NEGATIVES = 20
BM25_MEMBER = "bm25"  # a fused teacher's member that is the candidates' BM25 score


def build_teacher_scores(directory: str, checkpoints: Sequence[str], *,
                         weights: Optional[Sequence[float]] = None,
                         negatives: int = DEFAULT_NEGATIVES, seed: int = 0,
                         num_queries: Optional[int] = None, progress: bool = True,
                         overwrite: bool = False) -> dict:
  """Writes the teacher scores of the module docstring to `directory` (resuming an interrupted
  scoring there) and returns teacher.json's content. With several `checkpoints` (`bm25` names the
  candidates' BM25 scores) the teacher is their fusion, Σ wᵢ · zscore(runᵢ) per question
  (`t5rank fuse`'s code), each member's run kept as members/NN.run. `overwrite` scores every pair
  again (the earlier scores and their shards in `directory` are removed first)."""
  import numpy as np

  from t5rank.checkpoints import shipped
  from t5rank.checkpoints.resolved import resolve
  from t5rank.models.loading import load_reranker
  from t5rank.data.insuranceqa import load_split, write_ranking_job
  from t5rank.data.readers import read_corpus, write_run
  from t5rank.ranking import fusion
  from t5rank.ranking.scorer import ScoringOptions, params_fingerprint, score_candidates
  from t5rank.retrieval.bm25 import BM25, DEFAULT_B, DEFAULT_K1

  checkpoints = list(checkpoints)
  if negatives < 1:
    raise ValueError(f"the number of negatives per question must be positive, got {negatives}")
  if not checkpoints or (len(checkpoints) > 1) != (weights is not None) or (
      weights is not None and len(weights) != len(checkpoints)):
    raise ValueError("one teacher checkpoint, or several with one weight each (a fused teacher), "
                     f"got {len(checkpoints)} checkpoint(s) and weights {weights}")
  if checkpoints == [BM25_MEMBER]:
    raise ValueError("BM25 alone is no teacher: give a reranker checkpoint (or several with "
                     "--weights, bm25 among them)")
  if weights is not None:
    fusion.check_weights(weights, len(checkpoints))  # before any member scores a pair
  # an unknown name or no checkpoint: refused before any work; each resolved once
  resolved = {c: resolve(c) for c in checkpoints if c != BM25_MEMBER}
  start = time.perf_counter()
  mark_owner(directory, "teacher")
  if overwrite:  # the command's own earlier scores: scored again
    import shutil

    for name in (SCORES_FILE, SCORES_FILE + ".shards", "members"):
      path = os.path.join(directory, name)
      if os.path.isdir(path):
        shutil.rmtree(path)
      elif os.path.exists(path):
        os.remove(path)
  if os.path.exists(os.path.join(directory, TEACHER_FILE)):  # stale until the new one is written
    os.remove(os.path.join(directory, TEACHER_FILE))
  data = load_split("train", "en", num_queries)
  rng = np.random.default_rng(seed)
  chosen = {}
  for qid in data.queries:
    pool = data.negatives[qid]
    picks = sorted(rng.choice(len(pool), min(negatives, len(pool)), replace=False)) if pool else []
    chosen[qid] = list(data.relevant[qid]) + [pool[i] for i in picks]
  files = write_ranking_job(os.path.join(directory, "data"), data.queries, data.answers,
                            data.relevant, chosen, "teacher_candidates")
  corpus = read_corpus(files["corpus.jsonl"])
  bm25 = BM25.open(corpus, os.path.join(directory, "index"), k1=DEFAULT_K1, b=DEFAULT_B)
  candidates = bm25.retrieve(data.queries, k=1_000_000,
                             candidates={q: [(d, 0.0) for d in docs] for q, docs in chosen.items()})
  write_run(os.path.join(directory, CANDIDATES_FILE), candidates, tag="bm25")
  scores_path = os.path.join(directory, SCORES_FILE)
  runs, members = [], []
  for i, checkpoint in enumerate(checkpoints):
    if checkpoint == BM25_MEMBER:
      runs.append(candidates)
      members.append({"checkpoint": BM25_MEMBER, "k1": DEFAULT_K1, "b": DEFAULT_B})
      continue
    reranker, params = load_reranker(resolved[checkpoint])
    path = scores_path if len(checkpoints) == 1 else os.path.join(directory, "members",
                                                                   f"{i:02d}.run")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    runs.append(score_candidates(
        reranker, params, queries=data.queries, corpus=corpus, candidates=candidates, output=path,
        options=ScoringOptions(window=0, tag="teacher"), model_id=os.path.abspath(resolved[checkpoint].path),
        progress=progress))
    recipe = None
    if checkpoint.startswith(shipped.PREFIX):
      recipe = shipped.read_recipe(checkpoint[len(shipped.PREFIX):])["sha256"]
    members.append({"checkpoint": checkpoint, "model": reranker.name,
                    "params_sha256": params_fingerprint(params), "recipe_sha256": recipe})
  if len(checkpoints) > 1:
    write_run(scores_path, fusion.interpolate_runs(runs, list(weights)), tag="teacher")
  info = {"teacher": members[0] if len(members) == 1 else {
              "fusion": members, "weights": list(weights), "normalization": "zscore"},
          "split": "train", "language": "en", "negatives": negatives, "seed": seed,
          "queries": len(data.queries), "pairs": sum(map(len, candidates.values())),
          "scores_sha256": sha256_file(scores_path),
          "qrels_sha256": sha256_file(files["qrels.txt"]),
          "seconds": round(time.perf_counter() - start, 1)}
  with atomic_write(os.path.join(directory, TEACHER_FILE)) as f:
    json.dump(info, f, indent=1)
  return info
