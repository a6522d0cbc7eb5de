"""InsuranceQA v2 (the offline `insuranceqa-data` package, Feng et al. 2015): the one loader.

Every user of the collection goes through here: training triples (`t5rank.data.sources`),
training-time evaluation (`t5rank.training.rerank_eval`), the TFDS builder, the demo's files and
the benchmarks, so they all see the same texts, pools and relevance.

- `load_records(split, language)`: the package's raw records of a split and all answers, checked.
- `clean(text)`: whitespace runs collapsed to one space, ends stripped (the package's texts carry
  stray tabs and double spaces; T5's SentencePiece and BM25 ignore them, files should not hold them).
- `load_split(split, language)`: one split cleaned: queries, all 27,413 answers, each query's
  relevant answers and its pool (relevant answers and the 200 retrieved negatives, by answer id:
  the candidate set InsuranceQA defines); `split_of(records, answers, language)` the same on given
  records.
- `export_insuranceqa(out_dir, split, language)` writes a split as the files of a ranking job:
  `queries.tsv` (`qid<TAB>question`), `corpus.jsonl` (all answers, `{"id", "text"}`), `qrels.txt`
  (`qid 0 answer_id 1`), `pool.run` (each pool, score 0, by answer id: the file ranks nothing).
Query ids are the package's (unique within a split). Cite Feng et al. 2015 and the corpus.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Optional

from t5rank.data.readers import write_run
from t5rank.files import atomic_directory

SPLITS = {"train": "load_train", "validation": "load_valid", "test": "load_test"}
LANGUAGES = ("en", "zh")
FILES = ("queries.tsv", "corpus.jsonl", "qrels.txt", "pool.run")


def clean(text: str) -> str:
  """`text` with whitespace runs collapsed to one space and no leading or trailing space."""
  return " ".join(text.split())


def load_records(split: str, language: str = "en") -> tuple[dict, dict]:
  """The raw `insuranceqa-data` records of `split` (`{qid: {en, zh, answers, negatives, ...}}`) and
  all answers (`{aid: {en, zh}}`), after checking `split` (train, validation, test) and `language`
  (en, zh)."""
  import insuranceqa_data

  if split not in SPLITS:
    raise ValueError(f"unknown InsuranceQA split {split!r}; choose one of {list(SPLITS)}")
  if language not in LANGUAGES:
    raise ValueError(f"unknown InsuranceQA language {language!r}; choose one of {LANGUAGES}")
  return getattr(insuranceqa_data, SPLITS[split])(), insuranceqa_data.load_answers()


@dataclasses.dataclass(frozen=True)
class Split:
  """One split in one language, cleaned. Queries are in query-id order, answers in answer-id order;
  `pools[qid]` lists the query's relevant answers and retrieved negatives once each, by answer id;
  `negatives[qid]` the retrieved negatives that are not relevant, in the package's order."""
  queries: dict[str, str]
  answers: dict[str, str]
  relevant: dict[str, list[str]]
  negatives: dict[str, list[str]]
  pools: dict[str, list[str]]

  def qrels(self) -> dict[str, dict[str, int]]:
    """`{qid: {answer id: 1}}` for the relevant answers."""
    return {qid: {aid: 1 for aid in aids} for qid, aids in self.relevant.items()}


def load_split(split: str, language: str = "en", num_queries: Optional[int] = None) -> Split:
  """`split` in `language`, its first `num_queries` queries by id (all when None)."""
  records, answers = load_records(split, language)
  return split_of(records, answers, language, num_queries)


def split_of(records: dict, answers: dict, language: str,
             num_queries: Optional[int] = None) -> Split:
  """`load_split` on given records (`{qid: {en, zh, answers, negatives}}`) and answers
  (`{aid: {en, zh}}`)."""
  qids = sorted(records, key=int)[:num_queries]
  relevant = {qid: list(records[qid]["answers"]) for qid in qids}
  return Split(
      queries={qid: clean(records[qid][language]) for qid in qids},
      answers={aid: clean(answers[aid][language]) for aid in sorted(answers, key=int)},
      relevant=relevant,
      negatives={qid: [a for a in records[qid]["negatives"] if a not in set(relevant[qid])]
                 for qid in qids},
      pools={qid: sorted(set(relevant[qid]) | set(records[qid]["negatives"]), key=int)
             for qid in qids})


def export_insuranceqa(out_dir: str, split: str = "test", language: str = "en") -> dict[str, str]:
  """Writes the four files of the module docstring to `out_dir` (each atomically) and returns
  {file name: path}. `split` is train, validation or test; `language` en or zh."""
  data = load_split(split, language)
  return write_ranking_job(out_dir, data.queries, data.answers, data.relevant, data.pools, "pool")


def write_ranking_job(out_dir: str, queries: dict[str, str], documents: dict[str, str],
                      relevant: dict[str, list[str]], pools: dict[str, list[str]],
                      tag: str, extra: Optional[dict[str, dict]] = None) -> dict[str, str]:
  """Writes `queries.tsv`, `corpus.jsonl`, `qrels.txt` (relevance 1), `pool.run` (each pool,
  score 0, in its order, run tag `tag`) and each JSON object of `extra` ({file name: object}) to
  `out_dir` as one set (`t5rank.files.atomic_directory`: a kill leaves the old set or the new);
  returns {file name: path}."""
  names = list(FILES) + list(extra or {})
  with atomic_directory(out_dir) as directory:
    with open(os.path.join(directory, "queries.tsv"), "w", encoding="utf-8") as f:
      f.writelines(f"{qid}\t{text}\n" for qid, text in queries.items())
    with open(os.path.join(directory, "corpus.jsonl"), "w", encoding="utf-8") as f:
      f.writelines(json.dumps({"id": docid, "text": text}, ensure_ascii=False) + "\n"
                   for docid, text in documents.items())
    with open(os.path.join(directory, "qrels.txt"), "w", encoding="utf-8") as f:
      f.writelines(f"{qid} 0 {docid} 1\n" for qid, docids in relevant.items() for docid in docids)
    write_run(os.path.join(directory, "pool.run"),
              {qid: [(docid, 0.0) for docid in pool] for qid, pool in pools.items()}, tag=tag)
    for name, content in (extra or {}).items():
      with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        json.dump(content, f, indent=1)
  return {name: os.path.join(out_dir, name) for name in names}
