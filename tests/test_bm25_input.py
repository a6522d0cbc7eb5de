"""The BM25 score in monoT5's input (`t5rank.data.bm25_input`): the text, the ids, the scored triple
tables, the SeqIO preprocessors, the scorer and the checkpoint flag, all agreeing on one input."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t5rank.data import bm25_input
from t5rank.data import preprocessors
from t5rank.models.inputs import EOS_ID, assemble, encode_pair, encode_pairs, format_input, score_text
from t5rank.models.inputs import TemplateIds
from t5rank.data.sources import mix_tables
from t5rank.models.config import get_config
from t5rank.models.monot5 import MonoT5
from t5rank.ranking.candidates import Pair, first_stage_scores
from t5rank.data.sources import TripleTable
from t5rank.models.vocab import load_vocabulary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Three documents whose analyzed terms are plain words (no stopwords, Porter leaves them alone).
DOCUMENTS = ["car car dog", "dog cat", "bird"]
QUERIES = ["car dog", "bird cat"]


def bm25_by_hand(query: str, document: str, k1: float = 0.9, b: float = 0.4) -> float:
  """The formula of `t5rank.retrieval.bm25`'s docstring, on whitespace words."""
  docs = [d.split() for d in DOCUMENTS]
  avgdl = sum(map(len, docs)) / len(docs)
  words = document.split()
  total = 0.0
  for term in query.split():
    df = sum(term in d for d in docs)
    tf_ = words.count(term)
    if not df or not tf_:
      continue
    idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
    total += idf * tf_ / (tf_ + k1 * (1 - b + b * len(words) / avgdl))
  return total


def table() -> TripleTable:
  """Query 0: positive doc 0, pool {1, 2}; query 1: positive doc 2, pool {0}."""
  return TripleTable(QUERIES, DOCUMENTS, np.array([[0, 0], [1, 2]]), np.array([0, 1]),
                     np.array([0, 2, 3]), np.array([1, 2, 0]))


def test_score_text_rounds_half_to_even_and_refuses_bad_scores():
  assert score_text(12.5) == "BM25: 12" and score_text(13.5) == "BM25: 14"
  assert score_text(0.49) == "BM25: 0" and score_text(7.51) == "BM25: 8"
  for bad in (-0.1, float("nan"), float("inf")):
    with pytest.raises(ValueError, match="finite number >= 0"):
      score_text(bad)
  assert format_input("q", "d", 3.2) == "Query: q BM25: 3 Document: d Relevant:"
  assert format_input("q", "d") == "Query: q Document: d Relevant:"


def test_ids_with_a_score_are_the_ids_of_the_whole_text():
  vocab = load_vocabulary()
  for query, document, score in [("what is a deductible?", "You pay it first.", 14.2),
                                 ("法律要求残疾保险吗？", "Coverage follows the car.", 0.0)]:
    whole = vocab.encode(format_input(query, document, score)) + [EOS_ID]
    assert encode_pair(vocab, query, document, score=score) == whole


def test_the_score_is_never_cut():
  vocab = load_vocabulary()
  marks, score = TemplateIds(vocab), vocab.encode("BM25: 7")
  ids = assemble(vocab.encode("word " * 50), vocab.encode("document"), marks, 24, score)
  assert len(ids) == 24
  assert ids[-4 - len(marks.document) - len(score):-4 - len(marks.document)] == score
  with pytest.raises(ValueError, match="cannot hold the template"):
    assemble([], [], marks, len(marks.query) + len(marks.document) + 4, score)


def test_score_table_gives_each_pair_its_bm25_score():
  scored = bm25_input.score_table(table())
  expected_positive = [bm25_by_hand("car dog", "car car dog"), bm25_by_hand("bird cat", "bird")]
  expected_pool = [bm25_by_hand("car dog", "dog cat"), bm25_by_hand("car dog", "bird"),
                   bm25_by_hand("bird cat", "car car dog")]
  np.testing.assert_allclose(scored.positive_scores, expected_positive, rtol=1e-6)
  np.testing.assert_allclose(scored.pool_scores, expected_pool, rtol=1e-6)
  assert expected_pool[1] == expected_pool[2] == 0.0 and expected_positive[0] > expected_pool[0] > 0
  for query, positive, negative, s_pos, s_neg in scored.triples(num_epochs=3, seed=2):
    assert s_pos == pytest.approx(bm25_by_hand(query, positive), rel=1e-6)
    assert s_neg == pytest.approx(bm25_by_hand(query, negative), rel=1e-6)
  plain = [t for t in table().triples(num_epochs=3, seed=2)]
  assert [t[:3] for t in scored.triples(num_epochs=3, seed=2)] == plain  # the same stream


def test_scores_survive_subsampling_and_mixing():
  scored = bm25_input.score_table(table())
  small = scored.subsample(1, seed=0)
  [(query, positive, negative, s_pos, s_neg)] = list(small.triples(num_epochs=1))
  assert (s_pos, s_neg) == (pytest.approx(bm25_by_hand(query, positive), rel=1e-6),
                            pytest.approx(bm25_by_hand(query, negative), rel=1e-6))
  assert [t[:3] for t in small.triples(num_epochs=1)] == list(table().subsample(1, 0).triples(
      num_epochs=1))
  mixed = mix_tables(scored, small)
  assert len(mixed) == 3
  for query, positive, negative, s_pos, s_neg in mixed.triples(num_epochs=1):
    assert s_pos == pytest.approx(bm25_by_hand(query, positive), rel=1e-6)
  with pytest.raises(ValueError, match="scored and unscored"):
    mix_tables(scored, table())
  with pytest.raises(ValueError, match="both positive_scores and pool_scores"):
    TripleTable(QUERIES, DOCUMENTS, scored.positives, scored.positive_pools, scored.pool_starts,
                scored.pool_docs, positive_scores=scored.positive_scores)


def test_top_of_pools_keeps_each_pools_highest_bm25_answers():
  # Query 0's pool {doc 1, doc 2} scores (dog cat: > 0, bird: 0); query 1's pool is {doc 0}.
  scored = bm25_input.score_table(table())
  top = bm25_input.top_of_pools(scored, 1)
  assert top.pool_starts.tolist() == [0, 1, 2] and top.pool_docs.tolist() == [1, 0]
  np.testing.assert_allclose(top.pool_scores, [bm25_by_hand("car dog", "dog cat"), 0.0], rtol=1e-6)
  assert {t[2] for t in top.triples(num_epochs=5) if t[0] == "car dog"} == {"dog cat"}
  whole = bm25_input.top_of_pools(scored, 2)  # no pool is longer: the table itself
  assert whole.pool_docs.tolist() == scored.pool_docs.tolist()
  with pytest.raises(ValueError, match="scored table"):
    bm25_input.top_of_pools(table(), 1)
  with pytest.raises(ValueError, match="at least 1"):
    bm25_input.top_of_pools(scored, 0)


def test_hard_negatives_double_the_train_rows_against_the_top_of_each_pool(monkeypatch):
  # duoT5's hard-negative source: every train row against its whole pool and against the pool's
  # BM25 top 1 (query 0: "dog cat"); unscored, as the duoT5 task reads triples; other splits as is.
  monkeypatch.setattr(bm25_input.sources, "insuranceqa", lambda split, language: table())
  bm25_input.insuranceqa_hard_negatives.cache_clear()
  bm25_input.insuranceqa_scored.cache_clear()
  hard = bm25_input.insuranceqa_hard_negatives("train", "en", pool_depth=1)
  bm25_input.insuranceqa_hard_negatives.cache_clear()
  assert len(hard) == 4 and not hard.scored
  assert hard.pool_starts.tolist() == [0, 2, 3, 4, 5]
  assert [hard.documents[d] for d in hard.pool_docs] == ["dog cat", "bird", "car car dog",
                                                         "dog cat", "car car dog"]
  assert bm25_input.insuranceqa_hard_negatives("validation", "en").pool_docs.tolist() == [1, 2, 0]
  bm25_input.insuranceqa_hard_negatives.cache_clear()
  # the scored twin (duoT5 with the BM25 scores in its input): the same rows, with their scores
  scored = bm25_input.insuranceqa_scored("train", "en", pool_depth=1)
  bm25_input.insuranceqa_scored.cache_clear()
  assert scored.scored and scored.pool_docs.tolist() == hard.pool_docs.tolist()
  assert scored.pool_starts.tolist() == [0, 2, 3, 4, 5]
  np.testing.assert_allclose(scored.pool_scores[:2], [bm25_by_hand("car dog", "dog cat"),
                                                      bm25_by_hand("car dog", "bird")], rtol=1e-6)


@pytest.mark.parametrize("max_length", [512, 22])
def test_preprocessors_with_scores_match_encode_pairs(max_length):
  pairs = [("what is a deductible?", "The amount you pay before the insurer pays. " * 6, 12.5),
           ("can i cancel my life insurance policy at any time in any state?", "Yes.", 3.7),
           ("法律要求残疾保险吗？", "Coverage follows the car.", 0.0)]
  features = preprocessors.output_features()
  ds = tf.data.Dataset.from_tensor_slices({
      "query": [q for q, _, _ in pairs], "positive": [d for _, d, _ in pairs],
      "negative": ["Other." for _ in pairs], "positive_score": [s for _, _, s in pairs],
      "negative_score": [0.2 for _ in pairs]})
  ds = preprocessors.split_triples(ds)
  ds = preprocessors.format_monot5(ds, output_features=features, bm25_in_input=True)
  ds = preprocessors.tokenize_monot5(ds, features, {"inputs": max_length, "targets": 2},
                                     bm25_in_input=True)
  got = list(ds.as_numpy_iterator())
  vocab = load_vocabulary()
  expected = encode_pairs(vocab, [q for q, _, _ in pairs for _ in (0, 1)],
                          [d for _, d, _ in pairs for d in (d, "Other.")], max_length,
                          [x for _, _, s in pairs for x in (s, 0.2)])
  assert [ex["inputs"].tolist() for ex in got] == expected
  assert got[0]["inputs_pretokenized"].decode().startswith(
      "Query: what is a deductible? BM25: 12 Document: The amount")
  assert [ex["targets"].tolist() for ex in got] == [[1176, 1], [6136, 1]] * 3


def test_preprocessors_refuse_pairs_without_scores():
  ds = tf.data.Dataset.from_tensors({"query": "q", "document": "d", "label": 1})
  with pytest.raises(ValueError, match="needs pairs with a `score`"):
    preprocessors.format_monot5(ds, bm25_in_input=True)


def test_scorer_reads_each_candidates_run_score():
  vocab = load_vocabulary()
  queries = {"1": "cancel life insurance?"}
  passages = {"a": ["You can cancel.", "Any time."], "b": ["No."]}
  pairs = [Pair("1", "a", 0), Pair("1", "a", 1), Pair("1", "b", 0)]
  first_stage = first_stage_scores({"1": [("a", 9.6), ("b", 2.4)]})
  expected = encode_pairs(vocab, ["cancel life insurance?"] * 3, ["You can cancel.", "Any time.",
                                                                 "No."], 32, [9.6, 9.6, 2.4])
  reranker = MonoT5(get_config("tiny"), vocab, (1176, 6136), max_length=32, bm25_in_input=True)
  assert reranker.encode([queries[p.qid] for p in pairs],
                         [passages[p.docid][p.part] for p in pairs],
                         [first_stage[p.qid, p.docid] for p in pairs]) == expected
  with pytest.raises(ValueError, match=r"1 score\(s\) that are not finite numbers >= 0"):
    first_stage_scores({"1": [("a", 9.6), ("b", -1.0)]})


def test_score_command_refuses_a_run_without_scores_for_a_bm25_in_input_checkpoint(tmp_path):
  from t5rank.checkpoints.native import CONFIG_FILE, METADATA_FILE, PARAMS_DIR

  checkpoint = tmp_path / "ckpt"
  (checkpoint / PARAMS_DIR).mkdir(parents=True)  # the weights are read only after the inputs
  (checkpoint / CONFIG_FILE).write_text("{}")
  (checkpoint / METADATA_FILE).write_text('{"bm25_in_input": true}')
  (tmp_path / "q.tsv").write_text("1\tcan i cancel?\n")
  (tmp_path / "c.jsonl").write_text('{"id": "a", "text": "Yes."}\n')
  (tmp_path / "cand.tsv").write_text("1\ta\n")
  done = subprocess.run(
      [sys.executable, "-m", "t5rank.cli", "score", "--checkpoint", str(checkpoint),
       "--queries", str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.jsonl"),
       "--run", str(tmp_path / "cand.tsv"), "--output", str(tmp_path / "out.run")],
      env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=300)
  assert done.returncode == 1
  assert "the model reads each candidate's BM25 score" in done.stderr
  assert "(query '1', document 'a': -1.0)" in done.stderr
