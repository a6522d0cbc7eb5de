"""Cross-lingual training data: InsuranceQA's triples in English, Chinese and both (Chen et al. 2020).

The paper's training strategies (section IV-C-2) start from the English training pairs
D_en = {(q_i, p_i)}, i = 1..M, and their translations D_zh, and use the same amount of data, 2M
pairs, in each:

- merged: D_en and D_zh together (`cross_lingual_table(split, "merged")`);
- cascade: D_en first, then D_zh (two runs: the `en` and then the `zh` table, the second starting
  from the first's checkpoint);
- mixed: a random half of the English pairs get the Chinese passage, (q_en, p_zh), while their
  translations stay all-Chinese, (q_zh, p_zh); the other half stay English, (q_en, p_en), while
  their translations get the English passage, (q_zh, p_en): M one-language and M mixed-language
  pairs (`cross_lingual_table(split, "mixed", seed)`).

Here a "pair" is a row of t5rank's `TripleTable`: a query with one relevant answer, and the negative
drawn from the query's retrieved negatives each epoch (InsuranceQA's pool, as for monoT5 in one
language). A row's negatives are in the language of its passage, so within a row the language never
tells the relevant answer from the others. In `mixed`, exactly half of the M (query, relevant
answer) rows (M // 2, a seeded permutation) take the Chinese passage.

Documents: the English answers (indices 0..A-1) then the Chinese ones (A..2A-1), in answer-id order;
queries: each language's queries in query-id order (queries without a negative are left out, as in
`t5rank.data.sources.insuranceqa_table`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from t5rank.data.insuranceqa import load_records, split_of
from t5rank.data.sources import TripleTable, pooled_table

STRATEGIES = ("en", "zh", "merged", "mixed")
LANGUAGES = ("en", "zh")


def relevant_rows(split) -> list[tuple[str, str]]:
  """The (query id, relevant answer id) rows of an InsuranceQA split (`t5rank.data.insuranceqa.Split`) that
  every strategy lays out into pairs (`pair_layouts`): each query with a pool, each of its relevant
  answers, in the split's order."""
  return [(qid, aid) for qid in split.queries if split.negatives[qid] for aid in split.relevant[qid]]


def pair_layouts(num_rows: int, strategy: str, seed: int = 0) -> list[list[tuple[str, str]]]:
  """For each of `num_rows` (query, relevant answer) rows, the (query language, passage language)
  of the pairs `strategy` makes of it (see the module docstring): en or zh, one pair in that
  language; merged, (en, en) and (zh, zh); mixed, (en, zh) and (zh, zh) for a seeded half of the
  rows (exactly num_rows // 2), (en, en) and (zh, en) for the others."""
  if strategy not in STRATEGIES:
    raise ValueError(f"unknown cross-lingual strategy {strategy!r}; choose one of {STRATEGIES}")
  if strategy in LANGUAGES:
    return [[(strategy, strategy)]] * num_rows
  if strategy == "merged":
    return [[("en", "en"), ("zh", "zh")]] * num_rows
  chinese = np.zeros(num_rows, bool)
  chinese[np.random.default_rng(seed).permutation(num_rows)[:num_rows // 2]] = True
  return [[("en", "zh"), ("zh", "zh")] if c else [("en", "en"), ("zh", "en")] for c in chinese]


def cross_lingual_table(split: str, strategy: str, seed: int = 0,
                        num_queries: Optional[int] = None) -> TripleTable:
  """The triples of `strategy` (en, zh, merged or mixed; see the module docstring) on InsuranceQA's
  `split`; `seed` draws mixed's half (the others do not use it)."""
  if strategy not in STRATEGIES:
    raise ValueError(f"unknown cross-lingual strategy {strategy!r}; choose one of {STRATEGIES}")
  records, answers = load_records(split, "en")
  data = {lang: split_of(records, answers, lang, num_queries) for lang in LANGUAGES}
  answer_ids = list(data["en"].answers)
  answer_index = {aid: i for i, aid in enumerate(answer_ids)}
  documents = list(data["en"].answers.values()) + list(data["zh"].answers.values())

  def doc(aid: str, language: str) -> int:
    return answer_index[aid] + (len(answer_ids) if language == "zh" else 0)

  rows = relevant_rows(data["en"])
  layouts = pair_layouts(len(rows), strategy, seed)

  queries, query_index, pools, pool_index, positives, positive_pools = [], {}, [], {}, [], []
  for (qid, aid), layout in zip(rows, layouts):
    for query_language, passage_language in layout:
      key = (qid, query_language)
      if key not in query_index:
        query_index[key] = len(queries)
        queries.append(data[query_language].queries[qid])
      pool_key = (qid, passage_language)
      if pool_key not in pool_index:
        pool_index[pool_key] = len(pools)
        pools.append([doc(a, passage_language) for a in data["en"].negatives[qid]])
      positives.append((query_index[key], doc(aid, passage_language)))
      positive_pools.append(pool_index[pool_key])
  return pooled_table(queries, documents, positives, pools, positive_pools)
