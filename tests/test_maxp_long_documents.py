"""Robust04-style long documents built from InsuranceQA answers: MaxP finds the relevant window.

Each of the first test queries gets one long document holding one of its relevant answers among
unrelated answers (answers to other test questions), at the start, in the middle or at the end, and
two long documents of unrelated answers only. Every document spans several 10-sentence windows.

1. A deterministic oracle (1 when a window contains the relevant answer's text, else 0) scores the
   windows that `t5rank.ranking.candidates` builds (`candidate_passages`, window 10, stride 5), and the
   scorer's own aggregation and winner bookkeeping (`rank_documents`) must rank the relevant
   document first and name as winner the first window holding the whole answer, computed
   independently from the sentence positions; FirstP misses the answers placed after window 0.
2. `t5rank score --window 10 --stride 5` (MaxP) runs on the same files with a tiny random-weight
   checkpoint: a valid run and several scored windows per document, one winner each.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from t5rank.ranking.passages import split_sentences
from t5rank.data.readers import Document, read_run
from t5rank.ranking.candidates import Pair, candidate_passages
from t5rank.ranking.passages import rank_documents
from test_scoring import MICRO, random_params

NUM_QUERIES, DISTRACTORS = 3, 8
WINDOW, STRIDE = 10, 5
PLACES = ("start", "middle", "end")


def _clean(text: str) -> str:
  return " ".join(text.split())


@pytest.fixture(scope="module")
def collection():
  """(queries, corpus, candidates, relevant answer text and place per relevant document)."""
  import insuranceqa_data

  answers = insuranceqa_data.load_answers()
  records = insuranceqa_data.load_test()
  qids = sorted(records, key=int)
  # unrelated answers that split into sentences of at most 300 characters (some answers are lists
  # without sentence punctuation, one "sentence" of thousands of characters)
  others = [aid for qid in qids[NUM_QUERIES:NUM_QUERIES + 60] for aid in records[qid]["answers"]
            if max(map(len, split_sentences(_clean(answers[aid]["en"])))) <= 300]
  rng = np.random.default_rng(0)
  queries, corpus, candidates, relevant = {}, {}, {}, {}
  for i, qid in enumerate(qids[:NUM_QUERIES]):
    queries[qid] = _clean(records[qid]["en"])
    # a relevant answer short enough to fit one window whatever its position (<= 6 sentences)
    answer = next(_clean(answers[a]["en"]) for a in records[qid]["answers"]
                  if len(split_sentences(_clean(answers[a]["en"]))) <= 6)
    texts = [[_clean(answers[a]["en"]) for a in rng.choice(others, DISTRACTORS, replace=False)]
             for _ in range(3)]
    position = {"start": 0, "middle": DISTRACTORS // 2, "end": DISTRACTORS}[PLACES[i]]
    texts[0].insert(position, answer)
    for j, parts in enumerate(texts):
      corpus[f"{qid}-{j}"] = Document(" ".join(parts))
    relevant[f"{qid}-0"] = (answer, PLACES[i])
    candidates[qid] = [(f"{qid}-{j}", 0.0) for j in (2, 1, 0)]  # the relevant one listed last
  return queries, corpus, candidates, relevant


def expected_winner(text: str, answer: str) -> int:
  """The first window (window 10, stride 5) holding every sentence of `answer`, from the positions
  of its first and last characters among the document's sentences."""
  ends = np.cumsum([len(s) for s in split_sentences(text)])
  start = text.index(answer)
  first = int(np.searchsorted(ends, start, side="right"))
  last = int(np.searchsorted(ends, start + len(answer) - 1, side="right"))
  assert last - first < WINDOW - STRIDE + 1  # so some window holds the whole answer
  return max(0, math.ceil((last - (WINDOW - 1)) / STRIDE))


def test_maxp_finds_the_relevant_window_with_an_oracle_scorer(collection):
  queries, corpus, candidates, relevant = collection
  pairs, passages = candidate_passages(candidates, corpus, window=WINDOW, stride=STRIDE,
                                       language="en")
  assert all(len(windows) >= 3 for windows in passages.values())  # long documents

  def oracle(pair: Pair) -> float:
    answer = relevant.get(pair.docid, ("\0",))[0]
    return float(answer in passages[pair.docid][pair.part])

  rows = [(pair, oracle(pair), math.exp(oracle(pair))) for pair in pairs]
  maxp, winners = rank_documents(rows, "maxp")
  firstp, _ = rank_documents(rows, "firstp")
  for qid, ranked in maxp.items():
    docid = f"{qid}-0"
    assert ranked[0] == (docid, 1.0)
    assert [s for _, s in ranked[1:]] == [0.0, 0.0]
    answer, place = relevant[docid]
    winner = winners[qid, docid]
    assert winner == expected_winner(corpus[docid].text, answer)
    assert answer in passages[docid][winner]
    if place == "start":
      assert winner == 0 and firstp[qid][0] == (docid, 1.0)
    else:  # the answer lies beyond the first window: MaxP finds it, FirstP does not
      assert winner > 0 and dict(firstp[qid])[docid] == 0.0


def test_score_command_in_maxp_mode_on_long_documents(collection, tmp_path):
  from t5rank.cli import main
  from t5rank.models.config import get_config
  from t5rank.models.t5_weights import save_checkpoint

  queries, corpus, candidates, _ = collection
  config = get_config("tiny", **MICRO)
  save_checkpoint(str(tmp_path / "ckpt"), random_params(config), config)
  (tmp_path / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
  (tmp_path / "corpus.jsonl").write_text("".join(
      json.dumps({"id": d, "text": doc.text}) + "\n" for d, doc in corpus.items()))
  (tmp_path / "candidates.tsv").write_text("".join(
      f"{q}\t{d}\n" for q, docs in candidates.items() for d, _ in docs))
  output, per_passage = str(tmp_path / "maxp.run"), str(tmp_path / "passages.tsv")
  assert main(["score", "--checkpoint", str(tmp_path / "ckpt"),
               "--queries", str(tmp_path / "queries.tsv"), "--corpus", str(tmp_path / "corpus.jsonl"),
               "--run", str(tmp_path / "candidates.tsv"), "--output", output,
               "--window", str(WINDOW), "--stride", str(STRIDE), "--passages", "maxp",
               "--max-length", "128", "--batch-tokens", "2048",
               "--per-passage-output", per_passage]) == 0

  run = read_run(output)
  assert list(run) == list(candidates)
  for qid, ranked in run.items():
    assert sorted(d for d, _ in ranked) == sorted(d for d, _ in candidates[qid])
  rows = [line.rstrip("\n").split("\t") for line in open(per_passage)]
  windows: dict[tuple[str, str], list[tuple[float, int]]] = {}
  for qid, docid, window, log_p, _, winner in rows:
    windows.setdefault((qid, docid), []).append((float(log_p), int(winner)))
    assert int(window) == len(windows[qid, docid]) - 1
  assert len(windows) == NUM_QUERIES * 3
  for (qid, docid), scored in windows.items():
    assert len(scored) >= 3  # several windows per document
    assert sum(w for _, w in scored) == 1
    assert dict(run[qid])[docid] == max(s for s, _ in scored)  # MaxP: the best window's score
