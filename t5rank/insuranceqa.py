"""InsuranceQA v2 (the offline `insuranceqa-data` package) as the files of a ranking job.

`export_insuranceqa(out_dir, split, language)` writes, for the queries of one split:
- `queries.tsv`   `qid<TAB>question` (whitespace runs collapsed to one space);
- `corpus.jsonl`  all 27,413 answers, `{"id": ..., "text": ...}`, the same for every split;
- `qrels.txt`     `qid 0 answer_id 1` for each relevant answer;
- `pool.run`      each query's candidate pool: its relevant answers and its 200 retrieved negatives,
                  all with score 0 and sorted by answer id (so the file itself ranks nothing).
Query ids are the package's (unique within a split). Cite Feng et al. 2015 and the corpus.
"""

from __future__ import annotations

import json
import os

from t5rank.readers import atomic_write, write_run
from t5rank.sources import load_insuranceqa

FILES = ("queries.tsv", "corpus.jsonl", "qrels.txt", "pool.run")


def _clean(text: str) -> str:
  return " ".join(text.split())


def export_insuranceqa(out_dir: str, split: str = "test", language: str = "en") -> dict[str, str]:
  """Writes the four files above to `out_dir` (each atomically) and returns {file name: path}.
  `split` is train, validation or test; `language` en or zh."""
  records, answers = load_insuranceqa(split, language)
  qids = sorted(records, key=int)
  paths = {name: os.path.join(out_dir, name) for name in FILES}
  os.makedirs(out_dir, exist_ok=True)
  with atomic_write(paths["queries.tsv"]) as f:
    f.writelines(f"{qid}\t{_clean(records[qid][language])}\n" for qid in qids)
  with atomic_write(paths["corpus.jsonl"]) as f:
    f.writelines(json.dumps({"id": aid, "text": _clean(answers[aid][language])},
                            ensure_ascii=False) + "\n" for aid in sorted(answers, key=int))
  with atomic_write(paths["qrels.txt"]) as f:
    f.writelines(f"{qid} 0 {aid} 1\n" for qid in qids for aid in records[qid]["answers"])
  pool = {qid: [(aid, 0.0) for aid in sorted(set(records[qid]["answers"])
                                             | set(records[qid]["negatives"]), key=int)]
          for qid in qids}
  write_run(paths["pool.run"], pool, tag="pool")
  return paths
