"""Cross-lingual breakdowns of a run on XPR pools (`t5rank.data.xpr`): which languages it serves.

`language_breakdown(qrels, run, query_language)` splits the queries by their language and by the
language of their relevant answers (`same`: all in the query's language, `other`: all in the other
one, `both`: some of each) and gives each group's size and mean metrics (trec_eval's, as
`t5rank evaluate`). `language_preference(qrels, run, query_language, k)` asks whether the model
prefers candidates in the query's language whether relevant or not: over the queries, the mean
share of the query's language among the non-relevant candidates of the run's top k, against the
same share over the whole pool (what an order blind to language gives), and the same for the
relevant candidates in the top k; the non-relevant share is also given for each query language
apart, since a model that always puts Chinese first scores ~0 on English queries and ~1 on Chinese
ones, which average to the .5 of a model blind to language. A candidate's language is read from its
XPR document id (`ID:zh` is Chinese).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from t5rank.data.readers import Run
from t5rank.data.xpr import answer_of
from t5rank.evaluation.metrics import trec_eval_order, per_query, relevant_queries

BREAKDOWN_METRICS = ("MRR", "P@1", "acc@10", "MAP")
BY_LANGUAGE = "top_k_nonrelevant_"  # + a query language: the non-relevant share for those queries


def relevant_language(qrels: Mapping[str, Mapping[str, int]], qid: str, language: str) -> str:
  """`same`, `other` or `both`: the language of the query's relevant answers against `language`."""
  langs = {answer_of(d)[1] for d, rel in qrels[qid].items() if rel >= 1}
  if langs == {language}:
    return "same"
  return "other" if language not in langs else "both"


def language_breakdown(qrels: Mapping[str, Mapping[str, int]], run: Run,
                       query_language: Mapping[str, str],
                       metrics: Sequence[str] = BREAKDOWN_METRICS) -> list[dict]:
  """Rows {query_language, relevant, queries, mean: {metric: value}} for every (query language,
  relevant-answer language) group that has queries, then one row per query language ("all")."""
  qids = relevant_queries(qrels)
  values = per_query(qrels, run, metrics)
  groups: dict[tuple[str, str], list[int]] = {}
  for i, qid in enumerate(qids):
    language = query_language[qid]
    groups.setdefault((language, relevant_language(qrels, qid, language)), []).append(i)
    groups.setdefault((language, "all"), []).append(i)
  order = {"same": 0, "other": 1, "both": 2, "all": 3}
  return [{"query_language": lang, "relevant": rel, "queries": len(idx),
           "mean": {m: float(values[m][idx].mean()) for m in metrics}}
          for (lang, rel), idx in sorted(groups.items(), key=lambda kv: (kv[0][0], order[kv[0][1]]))]


def language_preference(qrels: Mapping[str, Mapping[str, int]], run: Run,
                        query_language: Mapping[str, str], k: int = 10) -> dict[str, float]:
  """Mean shares of the query's language (see the module docstring): `top_k_nonrelevant` and
  `pool_nonrelevant`, `top_k_relevant` and `pool_relevant`, and `top_k_nonrelevant_LANG` over the
  queries in language LANG alone (each over the queries where the set is not empty)."""
  shares: dict[str, list[float]] = {"top_k_nonrelevant": [], "pool_nonrelevant": [],
                                    "top_k_relevant": [], "pool_relevant": []}
  for qid in relevant_queries(qrels):
    ranked = [d for d, _ in trec_eval_order(run.get(qid, []))]
    language = query_language[qid]
    for name, docs in (("top_k", ranked[:k]), ("pool", ranked)):
      for relevant in (False, True):
        chosen = [d for d in docs if (qrels[qid].get(d, 0) >= 1) == relevant]
        if chosen:
          share = float(np.mean([answer_of(d)[1] == language for d in chosen]))
          shares[f"{name}_{'relevant' if relevant else 'nonrelevant'}"].append(share)
          if name == "top_k" and not relevant:
            shares.setdefault(BY_LANGUAGE + language, []).append(share)
  return {name: float(np.mean(v)) if v else float("nan") for name, v in shares.items()}


def format_breakdown(name: str, rows: list[dict], preference: dict[str, float], k: int) -> str:
  """A plain-text table of `language_breakdown` and `language_preference` for one run."""
  metrics = list(rows[0]["mean"]) if rows else []
  lines = [f"{name}: by query language and the language of its relevant answers",
           f"{'query':>6} {'relevant':>9} {'queries':>8} " + " ".join(f"{m:>8}" for m in metrics)]
  for r in rows:
    lines.append(f"{r['query_language']:>6} {r['relevant']:>9} {r['queries']:>8} "
                 + " ".join(f"{r['mean'][m]:8.4f}" for m in metrics))
  each = ", ".join(f"{name[len(BY_LANGUAGE):]} queries {value:.3f}"
                   for name, value in sorted(preference.items()) if name.startswith(BY_LANGUAGE))
  lines.append(f"share of the query's language: non-relevant in the top {k} "
               f"{preference['top_k_nonrelevant']:.3f} ({each}; whole pool "
               f"{preference['pool_nonrelevant']:.3f}); "
               f"relevant in the top {k} {preference['top_k_relevant']:.3f} "
               f"(whole pool {preference['pool_relevant']:.3f})")
  return "\n".join(lines)
