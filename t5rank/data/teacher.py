"""Teacher scores as training triples: the directory `t5rank teacher` writes
(`t5rank.pipelines.teacher`) read as a `TripleTable` whose every pair carries the teacher's score,
so that a student's triple is (query, relevant, non-relevant, t⁺, t⁻) and Margin-MSE can train it
on t⁺ − t⁻ (`t5rank.training.pairwise.margin_mse`).

    DIR/data/queries.tsv, corpus.jsonl, qrels.txt   the training questions and answers
    DIR/candidates.run     each question's relevant answers and its sample of non-relevant ones
    DIR/scores.run         the teacher's score of every candidate
    DIR/teacher.json       how they were made (the teacher, its hashes, the sample), the scores' hash
"""

from __future__ import annotations

import functools
import hashlib
import json
import os

import numpy as np

from t5rank.data.readers import read_corpus, read_qrels, read_queries, read_run
from t5rank.data.sources import Interner, TripleTable, pooled_table
from t5rank.files import read_json, sha256_file

TEACHER_FILE = "teacher.json"
CANDIDATES_FILE = "candidates.run"
SCORES_FILE = "scores.run"
TEACHER_PREFIX = "teacher:"  # a student's task name: teacher:DIR (TK triples, dual encoder pairs)


def read_teacher(directory: str) -> dict:
  """teacher.json of a teacher-score directory, after checking that scores.run is the file it
  describes (ValueError naming the file otherwise)."""
  path = os.path.join(directory, TEACHER_FILE)
  if not os.path.isfile(path):
    raise ValueError(f"{directory}: no {TEACHER_FILE}; make teacher scores with `t5rank teacher`")
  info = read_json(path)  # ValueError naming it when it is not JSON
  if not isinstance(info, dict):
    raise ValueError(f"{path}: not a description of teacher scores (a JSON object); make the "
                     "teacher scores again")
  for name, key in ((SCORES_FILE, "scores_sha256"), (os.path.join("data", "qrels.txt"),
                                                     "qrels_sha256")):
    file = os.path.join(directory, name)
    if key in info or key == "scores_sha256":
      if not os.path.isfile(file) or sha256_file(file) != info.get(key):
        raise ValueError(f"{file} is not the file {path} describes (its hash differs): it was "
                         "replaced or damaged; make the teacher scores again")
  return info


def teacher_recipe_sha256(info: dict) -> str:
  """The hash of what made a teacher directory's scores (teacher.json's `info`), wherever and on
  whichever machine they were computed: its members (each by its recipe's hash when it has one,
  else by its parameters' hash; BM25 by k1 and b), their weights and normalization, the split,
  language, number of questions, number of negatives and seed. A distilled model's recipe holds it
  (`gin_config.model_recipe`'s teacher_sha256); the scores themselves move in their last digits
  between CPUs, and their own hash is checked whenever a student reads them (`read_teacher`)."""
  teacher = info["teacher"]
  members = []
  for member in teacher.get("fusion", [teacher]):
    if "k1" in member:  # the candidates' BM25 scores
      members.append({"bm25": {"k1": member["k1"], "b": member["b"]}})
    elif member.get("recipe_sha256"):
      members.append({"model": member["model"], "recipe_sha256": member["recipe_sha256"]})
    else:
      members.append({"model": member["model"], "params_sha256": member["params_sha256"]})
  parts = {"members": members, "weights": teacher.get("weights"),
           "normalization": teacher.get("normalization"),
           **{k: info[k] for k in ("split", "language", "queries", "negatives", "seed")}}
  return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=4)
def teacher_table(directory: str) -> TripleTable:
  """The teacher scores in `directory` as a scored `TripleTable`: one positive row per (question,
  relevant answer), the question's pool its scored non-relevant answers; `positive_scores` and
  `pool_scores` are the teacher's."""
  read_teacher(directory)
  data = os.path.join(directory, "data")
  queries, corpus = read_queries(os.path.join(data, "queries.tsv")), read_corpus(
      os.path.join(data, "corpus.jsonl"))
  qrels = read_qrels(os.path.join(data, "qrels.txt"))
  scores = read_run(os.path.join(directory, SCORES_FILE))
  documents = Interner()
  query_texts, positives, pools, positive_pools = [], [], [], []
  positive_scores, pool_scores = [], []
  for qid, scored in scores.items():
    relevant = {d for d, label in qrels.get(qid, {}).items() if label > 0}
    pool = [(documents(corpus[d].text), s) for d, s in scored if d not in relevant]
    mine = [(documents(corpus[d].text), s) for d, s in scored if d in relevant]
    if not pool or not mine:
      continue
    query_texts.append(queries[qid])
    pools.append([d for d, _ in pool])
    pool_scores.extend(s for _, s in pool)
    for d, s in mine:
      positives.append((len(query_texts) - 1, d))
      positive_pools.append(len(pools) - 1)
      positive_scores.append(s)
  table = pooled_table(query_texts, documents.texts, positives, pools, positive_pools)
  return TripleTable(table.queries, table.documents, table.positives, table.positive_pools,
                     table.pool_starts, table.pool_docs,
                     positive_scores=np.asarray(positive_scores, np.float64),
                     pool_scores=np.asarray(pool_scores, np.float64))
