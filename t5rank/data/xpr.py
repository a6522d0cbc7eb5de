"""XPR: cross-lingual passage re-ranking pools built from InsuranceQA and its Chinese translation.

Chen, Zhang, Zhang, Yang 2020 ("Cross-Lingual Passage Re-Ranking With Alignment Augmented
Multilingual BERT", section V-A-2) build their test set from InsuranceQA v2 and its one-to-one
Chinese translation: each English query is replaced by its translation "in a coin-tossing manner",
and a random half of each query's candidate passages (250 of 500 there) by their translations. Here
the candidates are InsuranceQA's pools as `t5rank.data.insuranceqa` defines them (each query's
relevant answers and ~200 retrieved negatives), so a pool of n answers gets exactly n // 2 of them in
Chinese, chosen uniformly at random; the relevant answers are drawn like any other candidate.

    xpr = xpr_split("test", seed=0)
    xpr.queries["1"], xpr.query_language["1"]     # the query text and "en" or "zh"
    xpr.pools["1"]                                # ["12345", "2345:zh", ...]: document ids
    export_xpr("runs/xpr_test", "test", seed=0)   # queries.tsv, corpus.jsonl, qrels.txt, pool.run, xpr.json

Document ids: an answer's English text keeps its InsuranceQA id (`12345`), its Chinese translation
is `12345:zh` (`doc_id`, `answer_of`); the exported corpus holds all 27,413 answers in both
languages. The qrels list each query's relevant answers under the id its pool holds (a relevant
answer is relevant in either language, but each pool holds it once, in one language).

The construction is seeded and deterministic: one `random.Random` per query, seeded from
(split, seed, query id), draws the query's coin and then its translated half, so the choices for a
query do not depend on which other queries are built (`num_queries`). `xpr.json` records the split,
seed, every query's language and the counts.
"""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Optional

from t5rank.data.insuranceqa import load_records, split_of, write_ranking_job

ZH_SUFFIX = ":zh"
LANGUAGES = ("en", "zh")


def doc_id(answer_id: str, language: str) -> str:
  """The document id of an answer in `language`: `12345` (en) or `12345:zh`."""
  if language not in LANGUAGES:
    raise ValueError(f"XPR languages are {LANGUAGES}, not {language!r}")
  return answer_id if language == "en" else answer_id + ZH_SUFFIX


def answer_of(document_id: str) -> tuple[str, str]:
  """(answer id, language) of an XPR document id."""
  if document_id.endswith(ZH_SUFFIX):
    return document_id[:-len(ZH_SUFFIX)], "zh"
  return document_id, "en"


@dataclasses.dataclass(frozen=True)
class XPRSplit:
  """One split's cross-lingual pools. `queries` in query-id order, each in `query_language[qid]`;
  `pools[qid]` the candidates' document ids in answer-id order; `relevant[qid]` the relevant ones
  (ids as in the pool); `documents` every answer in both languages, by document id."""
  split: str
  seed: int
  queries: dict[str, str]
  query_language: dict[str, str]
  pools: dict[str, list[str]]
  relevant: dict[str, list[str]]
  documents: dict[str, str]

  def qrels(self) -> dict[str, dict[str, int]]:
    return {qid: {d: 1 for d in docs} for qid, docs in self.relevant.items()}

  def counts(self) -> dict[str, int]:
    """Queries per language and candidates per language over all pools."""
    out = {f"queries_{lang}": 0 for lang in LANGUAGES}
    out.update({f"candidates_{lang}": 0 for lang in LANGUAGES})
    for qid, lang in self.query_language.items():
      out[f"queries_{lang}"] += 1
      for d in self.pools[qid]:
        out[f"candidates_{answer_of(d)[1]}"] += 1
    return out


def query_rng(split: str, seed: int, qid: str) -> random.Random:
  """The query's own generator: its draws depend on (split, seed, qid) only (string seeds are
  hashed with SHA-512 by `random.Random`, the same in every process)."""
  return random.Random(f"xpr/{split}/{seed}/{qid}")


def xpr_split(split: str = "test", seed: int = 0, num_queries: Optional[int] = None) -> XPRSplit:
  """The XPR construction of InsuranceQA's `split` (train, validation or test) for `seed`, on its
  first `num_queries` queries by id (all when None)."""
  records, answers = load_records(split, "en")  # both languages' texts, read once
  en = split_of(records, answers, "en", num_queries)
  zh = split_of(records, answers, "zh", num_queries)
  if list(en.queries) != list(zh.queries) or list(en.answers) != list(zh.answers):
    raise ValueError(f"InsuranceQA {split}: the English and Chinese records do not correspond")
  queries, query_language, pools, relevant = {}, {}, {}, {}
  for qid in en.queries:
    rng = query_rng(split, seed, qid)
    language = "zh" if rng.random() < 0.5 else "en"
    pool = en.pools[qid]
    translated = set(rng.sample(pool, len(pool) // 2))
    ids = {aid: doc_id(aid, "zh" if aid in translated else "en") for aid in pool}
    queries[qid] = (zh if language == "zh" else en).queries[qid]
    query_language[qid] = language
    pools[qid] = [ids[aid] for aid in pool]
    relevant[qid] = [ids[aid] for aid in en.relevant[qid]]
  documents = {}
  for aid in en.answers:
    documents[doc_id(aid, "en")] = en.answers[aid]
    documents[doc_id(aid, "zh")] = zh.answers[aid]
  return XPRSplit(split=split, seed=seed, queries=queries, query_language=query_language,
                  pools=pools, relevant=relevant, documents=documents)


def export_xpr(out_dir: str, split: str = "test", seed: int = 0,
               num_queries: Optional[int] = None) -> dict[str, str]:
  """Writes the files of a ranking job for `xpr_split(split, seed, num_queries)` to `out_dir` as
  one set (`write_ranking_job`), and returns {file name: path}: `queries.tsv` (mixed languages), `corpus.jsonl` (every
  answer in both languages), `qrels.txt`, `pool.run` (each pool, score 0, in answer-id order: the
  file ranks nothing) and `xpr.json` (split, seed, each query's language, the counts)."""
  xpr = xpr_split(split, seed, num_queries)
  description = {"construction": "Chen et al. 2020, section V-A-2 (t5rank.data.xpr)",
                 "split": split, "seed": seed, "num_queries": len(xpr.queries),
                 "counts": xpr.counts(), "query_language": xpr.query_language}
  return write_ranking_job(out_dir, xpr.queries, xpr.documents, xpr.relevant, xpr.pools,
                           "xpr_pool", extra={"xpr.json": description})


def read_xpr_languages(path: str) -> dict[str, str]:
  """{query id: language} from an `xpr.json` written by `export_xpr`."""
  with open(path, encoding="utf-8") as f:
    return json.load(f)["query_language"]
