"""duoT5 (Pradeep, Nogueira, Lin 2021): the input, the aggregation of pairs by hand, the SeqIO task's
ids against the scorer's, and `t5rank score --depth K` reranking each query's top K by the
aggregated pairs and keeping the rest below in the run's order."""

from __future__ import annotations

import os

import numpy as np
import pytest

from t5rank import cli
from t5rank.data.readers import read_run
from t5rank.models.duot5 import DuoT5, assemble, format_input
from t5rank.models.loading import load_reranker
from t5rank.models.monot5 import score_step
from t5rank.models.t5_weights import save_checkpoint
from t5rank.models.vocab import EOS_ID, load_vocabulary
from t5rank.ranking.duo_pairs import aggregate
from t5rank.testing import micro_config, random_params


class Marks:  # one id per template word, to count by hand
  query, document0, document1, relevant = [7], [8], [9], [10]


@pytest.mark.parametrize("first, second, kept", [
    (20, 20, (5, 5)),  # both long: half the room each
    (2, 20, (2, 8)),   # the first short: the second takes the rest
    (20, 3, (7, 3)),   # the second short: the first takes the rest
    (2, 3, (2, 3)),    # both fit
])
def test_both_documents_keep_a_share_of_the_room(first, second, kept):
  # max_length 16: 4 marks + EOS + 1 query id leave a room of 10 ids
  ids = assemble([100], list(range(200, 200 + first)), list(range(300, 300 + second)), Marks(),
                 max_length=16)
  assert len(ids) == min(16, 6 + first + second) and ids[-2:] == [10, EOS_ID]
  assert ids[:3] == [7, 100, 8]
  assert ids[3:3 + kept[0]] == list(range(200, 200 + kept[0]))
  assert ids[3 + kept[0]] == 9
  assert ids[4 + kept[0]:4 + kept[0] + kept[1]] == list(range(300, 300 + kept[1]))


def test_each_documents_score_precedes_its_mark_and_is_never_cut():
  # max_length 16: 4 marks + EOS + 1 query id + 2 + 1 score ids leave a room of 7 ids
  ids = assemble([100], list(range(200, 220)), list(range(300, 320)), Marks(), max_length=16,
                 score_ids=([50, 51], [52]))
  assert ids == [7, 100, 50, 51, 8, 200, 201, 202, 52, 9, 300, 301, 302, 303, 10, EOS_ID]


def test_aggregations_by_hand():
  p = np.array([[0, .9, .8], [.2, 0, .6], [.1, .5, 0]])  # p[i, j] = p(d_i more relevant than d_j)
  np.testing.assert_allclose(aggregate(p, "sum"), [.9 + .8, .2 + .6, .1 + .5])
  # sym-sum: d0 = .9 + .8 + (1 - .2) + (1 - .1) = 3.4
  np.testing.assert_allclose(aggregate(p, "sym-sum"), [3.4, .2 + .6 + .1 + .5, .1 + .5 + .2 + .4])
  np.testing.assert_allclose(aggregate(p, "log-sum"), np.log([.9 * .8, .2 * .6, .1 * .5]))
  np.testing.assert_allclose(aggregate(p, "sym-log-sum"),
                             np.log([.9 * .8 * .8 * .9, .2 * .6 * .1 * .5, .1 * .5 * .2 * .4]))
  with pytest.raises(ValueError, match="unknown aggregation 'max'"):
    aggregate(p, "max")


def test_the_input_is_pygaggles_string_when_it_fits():
  vocab = load_vocabulary()
  reranker = DuoT5(micro_config(), vocab, (1176, 6136), max_length=64)
  q, d0, d1 = "what does life insurance cover", "It pays a death benefit.", "Car insurance."
  [ids] = reranker.encode([q], [(d0, d1)])
  assert ids == vocab.encode(format_input(q, d0, d1)) + [EOS_ID]
  assert format_input(q, d0, d1) == ("Query: what does life insurance cover Document0: It pays a "
                                     "death benefit. Document1: Car insurance. Relevant:")


def test_the_bm25_input_writes_each_documents_score_before_its_mark():
  vocab = load_vocabulary("insuranceqa_en_8k")
  reranker = DuoT5(micro_config(vocab_size=8000), vocab, (961, 4396), max_length=64,
                   bm25_in_input=True)
  q, d0, d1 = "what does life insurance cover", "It pays a death benefit.", "Car insurance."
  assert format_input(q, d0, d1, (14.2, 12.5)) == (
      "Query: what does life insurance cover BM25: 14 Document0: It pays a death benefit. "
      "BM25: 12 Document1: Car insurance. Relevant:")  # 12.5: half to even
  [ids] = reranker.encode([q], [(d0, d1)], [(14.2, 12.5)])
  assert ids == vocab.encode(format_input(q, d0, d1, (14.2, 12.5))) + [EOS_ID]
  with pytest.raises(ValueError, match="two scores per pair"):
    reranker.encode([q], [(d0, d1)])
  assert "BM25 scores in the input" in reranker.describe()
  assert reranker.reads_first_stage and reranker.fingerprint()["bm25_in_input"]


@pytest.mark.parametrize("bm25_in_input", [False, True])
def test_the_training_task_tokenizes_as_the_scorer(bm25_in_input):
  import tensorflow as tf

  from t5rank.data import preprocessors

  features = preprocessors.output_features("insuranceqa_en_8k")
  triples = tf.data.Dataset.from_tensor_slices({
      "query": ["is my car covered", "what is a deductible"],
      "positive": ["Your policy covers the car you drive. " * 20, "The amount you pay first."],
      "negative": ["Life insurance pays a benefit.", "Annuities pay an income. " * 30],
      **({"positive_score": [14.2, 2.5], "negative_score": [9.7, 0.4]} if bm25_in_input else {})})
  rows = list(preprocessors.tokenize_duot5(
      preprocessors.format_duot5(preprocessors.split_triples_duo(triples),
                                 output_features=features, bm25_in_input=bm25_in_input),
      features, sequence_length={"inputs": 96},
      bm25_in_input=bm25_in_input).as_numpy_iterator())
  assert [r["label"] for r in rows] == [1, 0, 1, 0]
  reranker = DuoT5(micro_config(vocab_size=8000), load_vocabulary("insuranceqa_en_8k"),
                   (961, 4396), max_length=96, bm25_in_input=bm25_in_input)
  scores = [(14.2, 9.7), (9.7, 14.2), (2.5, 0.4), (0.4, 2.5)]  # each order's documents' scores
  expected = reranker.encode([r["query"].decode() for r in rows],
                             [(r["document0"].decode(), r["document1"].decode()) for r in rows],
                             scores if bm25_in_input else None)
  assert [list(r["inputs"]) for r in rows] == expected
  if bm25_in_input:
    assert rows[0]["inputs_pretokenized"].decode().startswith(
        "Query: is my car covered BM25: 14 Document0: Your policy")
    assert " BM25: 10 Document1: Life insurance" in rows[0]["inputs_pretokenized"].decode()
    assert rows[2]["inputs_pretokenized"].decode().startswith(  # 2.5: half to even, as round
        "Query: what is a deductible BM25: 2 Document0: The amount")
  assert max(map(len, expected)) == 96  # the long ones were cut
  assert [list(r["targets"]) for r in rows] == [[961, 1], [4396, 1]] * 2


@pytest.mark.parametrize("bm25_in_input", [False, True])
def test_score_reranks_each_querys_top_k_by_its_pairs_and_keeps_the_rest_below(tmp_path,
                                                                               bm25_in_input):
  config = micro_config()
  params = random_params(config, std=0.5)
  save_checkpoint(str(tmp_path / "duo"), params, config,
                  {"model": "duot5", "bm25_in_input": bm25_in_input})
  texts = {f"d{i}": f"policy {'term ' * i}life car rate number {i}" for i in range(6)}
  (tmp_path / "q.tsv").write_text("q1\tcancel my life policy\nq2\tcar insurance rate\n")
  (tmp_path / "c.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in texts.items()))
  # q1's run ranks d5 d4 ... d0 (scores 6..1), q2's d0 .. d3
  (tmp_path / "run").write_text("".join(f"q1 Q0 d{5 - r} {r + 1} {6 - r} bm25\n" for r in range(6))
                                + "".join(f"q2 Q0 d{r} {r + 1} {4 - r} bm25\n" for r in range(4)))
  assert cli.main(["score", "--checkpoint", str(tmp_path / "duo"), "--queries",
                   str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
                   str(tmp_path / "run"), "--depth", "3", "-o", str(tmp_path / "out.run")]) == 0
  run = read_run(str(tmp_path / "out.run"))
  reranker, _ = load_reranker(str(tmp_path / "duo"))
  assert isinstance(reranker, DuoT5)
  assert reranker.bm25_in_input == bm25_in_input
  queries = {"q1": "cancel my life policy", "q2": "car insurance rate"}
  run_scores = {("q1", f"d{5 - r}"): 6 - r for r in range(6)} | {
      ("q2", f"d{r}"): 4 - r for r in range(4)}
  for qid, top, rest in (("q1", ["d5", "d4", "d3"], ["d2", "d1", "d0"]),
                         ("q2", ["d0", "d1", "d2"], ["d3"])):
    p = np.zeros((3, 3))
    for i, a in enumerate(top):  # each ordered pair through the model itself
      for j, b in enumerate(top):
        if i != j:  # with the BM25 input, each document's score in the run
          [ids] = reranker.encode([queries[qid]], [(texts[a], texts[b])],
                                  [(run_scores[qid, a], run_scores[qid, b])]
                                  if bm25_in_input else None)
          p[i, j] = float(score_step(params, np.asarray([ids]), config=config,
                                     target_ids=reranker.target_ids)[1][0])
    expected = aggregate(p, "sym-sum")
    got = dict(run[qid])
    np.testing.assert_allclose([got[d] for d in top], expected, atol=1e-5)
    assert [d for d, _ in run[qid][:3]] == [top[i] for i in np.argsort(-expected, kind="stable")]
    assert [d for d, _ in run[qid][3:]] == rest  # below, in the run's order
    floor = min(got[d] for d in top)  # the rest scored floor - 1, floor - 2, ...
    assert [s for _, s in run[qid][3:]] == [floor - 1.0 - k for k in range(len(rest))]
  assert not os.path.exists(tmp_path / "out.run.shards")


def test_a_hugging_face_directory_is_read_as_duot5_when_told(tmp_path):
  from t5rank.models.t5_weights.hf import save_hf_checkpoint

  config = micro_config()
  save_hf_checkpoint(str(tmp_path / "hf"), random_params(config, std=0.2), config)
  assert load_reranker(str(tmp_path / "hf"))[0].name == "monot5"
  assert isinstance(load_reranker(str(tmp_path / "hf"), model="duot5")[0], DuoT5)
  save_checkpoint(str(tmp_path / "tk_like"), random_params(config, std=0.2), config,
                  {"model": "monot5"})
  with pytest.raises(ValueError,
                     match=r"is a monot5 checkpoint \(its files say so\); --reranker duot5 is only"):
    load_reranker(str(tmp_path / "tk_like"), model="duot5")


def test_scores_equal_hugging_faces_on_pygaggles_input():
  """tests/golden/hf_duot5 (scripts/make_hf_goldens.py, transformers' PyTorch T5): the ids of
  pygaggle's duoT5 string and its p(document0 more relevant) for three pairs, one pair in both
  orders; t5rank's DuoT5 makes the same ids and, through the scorer, the same p."""
  import json

  from t5rank.ranking.scorer import score_pairs

  golden = os.path.join(os.path.dirname(__file__), "golden", "hf_duot5")
  with open(os.path.join(golden, "reference.json")) as f:
    pairs = json.load(f)["pairs"]
  reranker, params = load_reranker(golden, model="duot5")  # no spiece.model: T5's, with a warning
  assert isinstance(reranker, DuoT5) and reranker.target_ids == (1176, 6136)
  queries = [p["query"] for p in pairs]
  documents = [(p["document0"], p["document1"]) for p in pairs]
  assert reranker.encode(queries, documents) == [p["ids"] for p in pairs]
  _, probabilities = score_pairs(reranker, params, queries, documents)
  np.testing.assert_allclose(probabilities, [p["p"] for p in pairs], rtol=0, atol=1e-6)
  assert np.ptp([p["p"] for p in pairs]) > 0.01  # the pairs' p differ: not a vacuous match
