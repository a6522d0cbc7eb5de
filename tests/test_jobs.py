"""The scorer knows no model family: what a reranker scores for each query's candidates and how its
scores rank them is the reranker's job class (`t5rank.ranking.jobs`). Tested on hand-made rows for
the two shipped jobs (windows with MaxP, duoT5's ordered pairs) and with a toy reranker whose own
job (each candidate's first sentence only, FirstP by construction) `t5rank score`'s scorer and the
Python front door run unchanged."""

from __future__ import annotations

from typing import Optional, Sequence

import jax.numpy as jnp
import numpy as np

from t5rank.data.readers import Document, read_run
from t5rank.models.reranker import Batch, Reranker
from t5rank.ranking.candidates import Pair
from t5rank.ranking.jobs import PassageJob, job_class, plan_job
from t5rank.ranking.duo_pairs import PairJob
from t5rank.ranking.scorer import ScoringOptions, score_candidates

QUERIES = {"q1": "one", "q2": "two"}
CORPUS = {"a": Document("Aa aa. Bb bb bb. Cc."), "b": Document("Dddd dddd."),
          "c": Document("Eee eee eee eee. Ff ff.")}
CANDIDATES = {"q1": [("a", 3.0), ("b", 2.0), ("c", 1.0)], "q2": [("c", 5.0), ("a", 4.0)]}


def test_passage_job_scores_windows_and_ranks_by_maxp():
  options = ScoringOptions(window=1, stride=1, depth=2)
  job = plan_job(_Toy(), QUERIES, CORPUS, CANDIDATES, options)
  assert isinstance(job, PassageJob) and job_class(_Toy()) is PassageJob
  # depth 2: q1's a (3 sentences) and b (1), q2's c (2) and a (3); c stays below for q1
  assert job.pairs == [Pair("q1", "a", 0), Pair("q1", "a", 1), Pair("q1", "a", 2),
                       Pair("q1", "b", 0), Pair("q2", "c", 0), Pair("q2", "c", 1),
                       Pair("q2", "a", 0), Pair("q2", "a", 1), Pair("q2", "a", 2)]
  assert job.inputs(job.pairs[1:4]) == (["one"] * 3, ["Bb bb bb.", "Cc.", "Dddd dddd."], None)
  assert job.rest == {"q1": [("c", 1.0)], "q2": []}
  scores = [-3.0, -1.0, -2.0, -1.5, -0.5, -4.0, -0.25, -9.0, -9.0]
  rows = [(pair, s, float(np.exp(s))) for pair, s in zip(job.pairs, scores)]
  # MaxP: a = max(-3, -1, -2) = -1 > b = -1.5; q2: a = -0.25 > c = -0.5; q1's c below: -1.5 - 1
  assert job.run(rows) == {"q1": [("a", -1.0), ("b", -1.5), ("c", -2.5)],
                           "q2": [("a", -0.25), ("c", -0.5)]}
  lines = list(job.passage_lines(rows))
  assert lines[1] == f"q1\ta\t1\t-1.0\t{float(np.exp(-1.0))!r}\t1\n"  # the deciding window
  assert lines[0].endswith("\t0\n") and len(lines) == 9
  assert PassageJob.num_inputs(5) == 5 and PassageJob.example_input("t", 2.0) == ("t", 2.0)


def test_pair_job_scores_ordered_pairs_and_ranks_by_sym_sum():
  job = PairJob.plan(_Toy(), QUERIES, CORPUS, {"q1": CANDIDATES["q1"]},
                     ScoringOptions(aggregate="sym-sum"), {("q1", "a"): 3.0,
                                                                  ("q1", "b"): 2.0,
                                                                  ("q1", "c"): 1.0})
  assert not job.independent
  assert [(p.docid, p.part) for p in job.pairs] == [("a", 1), ("a", 2), ("b", 0), ("b", 2),
                                                      ("c", 0), ("c", 1)]
  queries, texts, first = job.inputs(job.pairs[:2])
  assert texts == [("Aa aa. Bb bb bb. Cc.", "Dddd dddd."), ("Aa aa. Bb bb bb. Cc.",
                                                             "Eee eee eee eee. Ff ff.")]
  assert queries == ["one", "one"] and first == [(3.0, 2.0), (3.0, 1.0)]
  # p(row > column): a beats b .9 and c .6; b beats a .2, c .7; c beats a .3, b .4
  p = {("a", 1): .9, ("a", 2): .6, ("b", 0): .2, ("b", 2): .7, ("c", 0): .3, ("c", 1): .4}
  rows = [(pair, float(np.log(p[pair.docid, pair.part])), p[pair.docid, pair.part])
          for pair in job.pairs]
  # sym-sum: a = (.9 + 1 - .2) + (.6 + 1 - .3) = 3.0; b = (.2 + .1) + (.7 + .6) = 1.6;
  # c = (.3 + .4) + (.4 + .3) = 1.4
  run = job.run(rows)
  assert [d for d, _ in run["q1"]] == ["a", "b", "c"]
  np.testing.assert_allclose([s for _, s in run["q1"]], [3.0, 1.6, 1.4], atol=1e-12)
  assert next(iter(job.passage_lines(rows))) == f"q1\ta\tb\t{float(np.log(.9))!r}\t0.9\n"
  assert PairJob.num_inputs(7) == 42
  assert PairJob.example_input("t", 2.0) == (("t", "t"), (2.0, 2.0))


def test_a_reader_of_first_stage_scores_takes_its_candidates_in_the_first_stages_order():
  # The stage before (say monoT5) ranked q1's candidates c, a, b; BM25 ranked them a, b, c. Its
  # top 2 (c, a) are batched in BM25's order (a, c), as BM25's own run gives them, so a stage's
  # scores are the same bits whichever stage passed it the candidates.
  before = {"q1": [("c", 0.9), ("a", 0.5), ("b", 0.1)]}
  options = ScoringOptions(window=0, depth=2)
  job = plan_job(_BM25Toy(), QUERIES, CORPUS, before, options, first_stage_run=CANDIDATES)
  assert [p.docid for p in job.pairs] == ["a", "c"]
  assert job.first_stage == {("q1", "a"): 3.0, ("q1", "c"): 1.0}
  assert job.rest == {"q1": [("b", 0.1)]}  # below the depth: the stage before's order
  own = plan_job(_BM25Toy(), QUERIES, CORPUS, {"q1": [("a", 3.0), ("c", 1.0)]}, options)
  assert own.pairs == job.pairs
  # a reranker that reads no first-stage score takes them in the stage before's order
  assert [p.docid for p in plan_job(_Toy(), QUERIES, CORPUS, before, options).pairs] == ["c", "a"]


class _Toy(Reranker):
  """A reranker whose score of a passage is its length in characters."""
  name = "toy"

  def encode(self, queries, passages, first_stage=None):
    return [len(p) for p in passages]

  def batches(self, examples, *, batch_tokens, row_multiple=1, length_bucket=None):
    rows = -(-len(examples) // row_multiple) * row_multiple
    lengths = np.zeros(rows, np.float32)
    lengths[:len(examples)] = examples
    return [Batch(np.arange(len(examples)), (lengths,))]

  def score_batch(self, params, arrays):
    (lengths,) = arrays
    return lengths + params["bias"], jnp.ones_like(lengths)

  def param_axes(self):
    return {"bias": None}

  def fingerprint(self):
    return {"model": self.name}

  @property
  def reads_first_stage(self):
    return False


class _BM25Toy(_Toy):
  """The toy, reading each candidate's first-stage score."""

  @property
  def reads_first_stage(self):
    return True


class FirstSentenceJob(PassageJob):
  """Only each candidate's first sentence (FirstP, made by the job itself)."""

  @classmethod
  def plan(cls, reranker, queries, corpus, top, options, first_stage):
    job = super().plan(reranker, queries, corpus, top, options, first_stage)
    job.pairs = [pair for pair in job.pairs if pair.part == 0]
    return job


class _FirstSentenceToy(_Toy):
  job = f"{__name__}.FirstSentenceJob"


def test_a_rerankers_own_job_runs_through_the_scorer_and_the_front_door(tmp_path):
  import t5rank.ranker

  params = {"bias": np.float32(0.5)}
  options = ScoringOptions(window=1, stride=1, tag="toy")
  output = str(tmp_path / "toy.run")
  run = score_candidates(_FirstSentenceToy(), params, queries=QUERIES, corpus=CORPUS,
                         candidates=CANDIDATES, output=output, options=options, progress=False)
  # first sentences: a "Aa aa." 6, b "Dddd dddd." 10, c "Eee eee eee eee." 16; + 0.5
  expected = {"q1": [("c", 16.5), ("b", 10.5), ("a", 6.5)], "q2": [("c", 16.5), ("a", 6.5)]}
  assert run == expected and read_run(output) == expected
  ranker = t5rank.ranker.Ranker(_FirstSentenceToy(), params, checkpoint="toy", options=options)
  assert ranker.rank("one", [CORPUS[d].text for d in "abc"]) == [
      {"corpus_id": 2, "score": 16.5}, {"corpus_id": 1, "score": 10.5},
      {"corpus_id": 0, "score": 6.5}]
