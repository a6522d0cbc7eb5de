"""Dense retrieval (Gillick et al. 2018): the dual encoder's losses equal the paper's definitions on
numbers small enough to work out by hand; batches never repeat an answer; the transitive-closure
retrieval task on literal pairs; TF-IDF and MAP@k by hand; the index (exact = faiss flat = HNSW on
a tiny corpus, resume, a foreign encoder refused, empty texts) and the whole path through the CLI."""

from __future__ import annotations

import collections
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from t5rank.models import dual_encoder as de
from t5rank.models.words import WordVocabulary

COS = jnp.array([[0.8, 0.1], [0.3, 0.5]])  # two queries x two answers, positives on the diagonal


def test_in_batch_softmax_by_hand():
  # row 1: -log(e^.8 / (e^.8 + e^.1)) = log(1 + e^-.7); row 2: log(1 + e^-.2)
  expected = (math.log1p(math.exp(-0.7)) + math.log1p(math.exp(-0.2))) / 2
  np.testing.assert_allclose(de.in_batch_softmax(COS), expected, rtol=1e-6)
  assert abs(expected - 0.50066) < 1e-5


def test_in_batch_cross_entropy_by_hand():
  # diagonal cells have label 1: log(1 + e^-x); the others label 0: log(1 + e^x)
  cells = [math.log1p(math.exp(-0.8)), math.log1p(math.exp(0.1)),
           math.log1p(math.exp(0.3)), math.log1p(math.exp(-0.5))]
  np.testing.assert_allclose(de.sigmoid_cross_entropy(COS, jnp.eye(2)), sum(cells) / 4, rtol=1e-6)


def test_in_batch_triplet_by_hand():
  # row 1: max(0, .5 - .8 + .1) = 0; row 2: max(0, .5 - .5 + .3) = .3
  np.testing.assert_allclose(de.in_batch_triplet(COS, 0.5), 0.15, rtol=1e-6)


def test_in_batch_precision_at_1_counts_ties_as_misses():
  assert float(de.in_batch_precision_at_1(COS)) == 1.0
  assert float(de.in_batch_precision_at_1(jnp.array([[0.5, 0.5], [0.9, 0.2]]))) == 0.0


def test_losses_through_the_model_by_hand():
  # Embeddings: "a" = (1, 0), "b" = (0, 1), "c" = (1, 1). Query "a" vs answers "a c" and "b":
  # avg("a", "c") = (1, .5), cos with (1, 0) = 1/sqrt(1.25); cos((1, 0), (0, 1)) = 0.
  vocabulary = WordVocabulary(["a", "b", "c"])
  config = de.DualEncoderConfig(vocab_size=vocabulary.size, embedding_dim=2, scale_init=2.0)
  params = {"query": {"embedding": jnp.array([[9, 9], [9, 9], [1, 0], [0, 1], [1, 1.0]])},
            "scale": jnp.asarray(2.0), "bias": jnp.asarray(0.5)}
  q = jnp.array([[2, 0], [3, 1]])  # "a" + padding; "b" + unknown (left out of the average)
  d = jnp.array([[2, 4], [3, 0]])  # "a c"; "b"
  c = 1 / math.sqrt(1.25)
  np.testing.assert_allclose(de.cosines(params, q, d), [[c, 0], [c * 0.5, 1]], rtol=1e-6)
  loss, accuracy = de.loss_and_accuracy(params, config, q, d)
  expected = (math.log1p(math.exp(2 * (0 - c))) + math.log1p(math.exp(2 * (c * 0.5 - 1)))) / 2
  np.testing.assert_allclose(loss, expected, rtol=1e-6)  # β shifts a whole row: no effect
  assert float(accuracy) == 1.0
  labelled = config.replace(loss="cross_entropy")
  loss, _ = de.loss_and_accuracy(params, labelled, q, d, jnp.array([1, 0]))
  # g = 2·cos + .5 on each row's own pair: 2c + .5 (label 1) and 2·1 + .5 (label 0)
  expected = (math.log1p(math.exp(-(2 * c + 0.5))) + math.log1p(math.exp(2.5))) / 2
  np.testing.assert_allclose(loss, expected, rtol=1e-6)


def test_in_batch_softmax_with_pool_negatives_by_hand():
  # two queries, four candidates: the two positives (columns 0, 1), then one pool negative each
  cos = jnp.array([[0.8, 0.1, 0.6, -0.2], [0.3, 0.5, 0.7, 0.0]])
  # row 1: -log(e^.8 / (e^.8 + e^.1 + e^.6 + e^-.2)); row 2: its negative .7 beats its positive .5
  row1 = -math.log(math.exp(0.8) / sum(map(math.exp, (0.8, 0.1, 0.6, -0.2))))
  row2 = -math.log(math.exp(0.5) / sum(map(math.exp, (0.3, 0.5, 0.7, 0.0))))
  q = jnp.eye(2)  # q dᵀ = `cos` (vector_loss takes the vectors as given)
  d = cos.T
  loss, accuracy = de.vector_loss(q, d, jnp.asarray(1.0), jnp.asarray(0.0),
                                  "in_batch_softmax_pool", 0.5)
  np.testing.assert_allclose(loss, (row1 + row2) / 2, rtol=1e-6)
  assert abs((row1 + row2) / 2 - 1.14041) < 1e-5  # .98701 and 1.29381
  assert float(accuracy) == 0.5  # row 2's positive is below its pool negative


def test_pool_negatives_are_from_the_pool_and_never_relevant_to_the_batch():
  from t5rank.data.dual_pairs import Pairs, pool_negatives
  # the batch: q0-a0, q1-a1, q2-a2; a3 is relevant to q1 too (a pair not in this batch)
  data = Pairs(["q0", "q1", "q2"], [f"a{i}" for i in range(7)],
               [(0, 0), (1, 1), (2, 2), (1, 3)], [[1, 3, 5], [3, 4], []])
  for seed in range(20):
    rng = np.random.default_rng(seed)
    first, second, third = pool_negatives(data, data.pairs[:3], rng)
    assert first == 5  # q0's pool: a1 is a batch answer, a3 relevant to q1
    assert second == 4  # q1's pool: a3 is its own relevant answer
    assert third == 6  # an empty pool: a random answer, none of the above
  keyed = Pairs(data.questions, data.answers, data.pairs, data.negatives, keys=data.pairs)
  with pytest.raises(ValueError, match="one-language pairs"):
    pool_negatives(keyed, keyed.pairs[:3], np.random.default_rng(0))


def test_an_empty_text_encodes_to_zero_and_scores_zero():
  params = {"query": {"embedding": jnp.ones((4, 3))}, "scale": jnp.asarray(5.0),
            "bias": jnp.asarray(0.0)}
  vectors = de.encode(params, jnp.array([[0, 0], [1, 1], [2, 3]]), "query")
  assert np.isfinite(vectors).all()
  np.testing.assert_array_equal(vectors[:2], 0)  # padding only; unknown words only
  np.testing.assert_allclose(np.linalg.norm(vectors[2]), 1, rtol=1e-6)


def test_an_empty_text_in_a_batch_leaves_the_gradient_finite():
  # The second question (row 1) is all unknown words: its vector is zero, its cosines 0, and the
  # gradient must stay finite (a NaN here once stopped training on XPI's sentence pairs at step 2).
  config = de.DualEncoderConfig(vocab_size=5, embedding_dim=3, scale_init=5.0)
  embedding = np.array([[9, 9, 9], [9, 9, 9], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
  params = {"query": {"embedding": jnp.asarray(embedding)},
            "scale": jnp.asarray(5.0), "bias": jnp.asarray(0.0)}
  q = jnp.array([[2, 3], [1, 1]])  # words 2 and 3; unknown words only
  d = jnp.array([[2, 0], [4, 3]])
  grads = jax.grad(lambda p: de.loss_and_accuracy(p, config, q, d)[0])(params)
  assert all(np.isfinite(g).all() for g in jax.tree_util.tree_leaves(grads))
  np.testing.assert_array_equal(grads["query"]["embedding"][:2], 0)  # padding and unknown: none
  cos = np.asarray(de.cosines(params, q, d))
  np.testing.assert_array_equal(cos[1], 0)
  # q₀ = avg(e₂, e₃) ∝ (1, 1, 0); d₀ = e₂ = (1, 0, 0); d₁ = avg(e₄, e₃) ∝ (0, 1, 1)
  c = [1 / math.sqrt(2), 1 / 2]
  np.testing.assert_allclose(cos[0], c, rtol=1e-6)
  # loss = (−log softmax(α·c)₀ + log 2) / 2: the empty row's log 2 does not depend on α, so
  # dloss/dα = (Σⱼ pⱼ cⱼ − c₀) / 2 with p = softmax(α·c), from row 0 alone
  p = np.exp(5.0 * np.array(c)) / np.exp(5.0 * np.array(c)).sum()
  np.testing.assert_allclose(grads["scale"], (p @ c - c[0]) / 2, rtol=1e-5)


def test_distinct_batches_never_repeat_an_answer_or_a_question():
  from t5rank.data.dual_pairs import distinct_batches
  # answers 0 and 1 are shared by several questions; question 0 has two answers
  pairs = [(0, 0), (1, 0), (2, 0), (0, 1), (3, 1), (4, 2), (5, 3), (6, 4)]
  batches = distinct_batches(pairs, 3, seed=7)
  seen = []
  for _ in range(8):  # three epochs' worth of pairs
    batch = next(batches)
    assert len(batch) == 3
    assert len({pairs[i][0] for i in batch}) == 3 and len({pairs[i][1] for i in batch}) == 3
    seen += batch
  counts = np.bincount(seen, minlength=len(pairs))
  assert counts.min() >= 2 and counts.max() <= 4  # each pair about once per epoch
  again = distinct_batches(pairs, 3, seed=7)
  assert [next(again) for _ in range(8)] == [seen[i:i + 3] for i in range(0, 24, 3)]
  with pytest.raises(ValueError, match="at most that"):
    next(distinct_batches(pairs, 6, seed=0))  # only 5 distinct answers


def test_cross_lingual_pairs_follow_the_strategies_and_keep_translations_apart():
  from t5rank.data.cross_lingual import pair_layouts
  from t5rank.data.insuranceqa import load_split
  from t5rank.data.dual_pairs import Pairs, distinct_batches

  assert pair_layouts(2, "merged") == [[("en", "en"), ("zh", "zh")]] * 2
  mixed = pair_layouts(5, "mixed", seed=3)
  assert sum(layout == [("en", "zh"), ("zh", "zh")] for layout in mixed) == 2  # 5 // 2 rows
  assert sum(layout == [("en", "en"), ("zh", "en")] for layout in mixed) == 3
  en, zh = load_split("validation", "en"), load_split("validation", "zh")
  qid, aid = next(iter(en.queries)), en.relevant[next(iter(en.queries))][0]
  for strategy in ("merged", "mixed"):
    data = Pairs.cross_lingual("validation", strategy)
    rows = sum(len(r) for r in en.relevant.values())
    assert len(data.pairs) == 2 * rows == len(data.keys)
    assert len(data.questions) == 2 * len(en.queries) and len(data.answers) == 2 * len(en.answers)
    # the first row's two pairs: both keyed by the English question and answer
    assert data.keys[0] == data.keys[1] == (0, list(en.answers).index(aid))
    texts = {(data.questions[q], data.answers[a]) for q, a in data.pairs[:2]}
    if strategy == "merged":
      assert texts == {(en.queries[qid], en.answers[aid]), (zh.queries[qid], zh.answers[aid])}
    else:  # one pair across languages, the answer in one language for both
      assert len({a for _, a in texts}) == 1 and len({q for q, _ in texts}) == 2
    languages = collections.Counter((q >= len(en.queries), a >= len(en.answers))
                                    for q, a in data.pairs)
    if strategy == "merged":
      assert languages == {(False, False): rows, (True, True): rows}
    else:  # as many pairs across languages as in one, half of the rows' answers Chinese
      assert languages[(False, True)] + languages[(True, False)] == rows
      assert languages[(True, True)] + languages[(False, True)] == 2 * (rows // 2)
    # every pair keyed by its English question and answer, whichever language it is in
    nq, na = len(en.queries), len(en.answers)
    assert all(key == (q % nq, a % na) for (q, a), key in zip(data.pairs, data.keys))
    # a batch never holds a question or an answer together with its translation
    batch = next(distinct_batches(data.batch_keys, 1000, seed=0))
    assert len({data.keys[i][0] for i in batch}) == len({data.keys[i][1] for i in batch}) == 1000


def test_pseudo_query_pairs_extend_the_training_pairs_with_words_of_their_answers():
  from t5rank.data.pseudo_queries import _WORD as WORD  # how the pseudo-queries cut words
  from t5rank.data.dual_pairs import Pairs, distinct_batches

  base = Pairs.insuranceqa("train")
  data = Pairs.source("insuranceqa_en_pseudo", "train")
  real = len(base.pairs)
  assert data.pairs[:real] == base.pairs and data.answers == base.answers
  assert data.questions[:len(base.questions)] == base.questions
  assert len(data.pairs) - real == round(real * 0.3 / 0.7)  # 30% of the pairs: 9,139 of 30,464
  openings = {" ".join(q.split()[:2]) for q in base.questions}
  for q, a in data.pairs[real:real + 200]:  # each pseudo-query: an opening, then answer words
    words = data.questions[q].rstrip("?").split()
    assert " ".join(words[:2]) in openings
    answer_words = {w.lower() for w in WORD.findall(data.answers[a])}
    assert {w.lower() for w in words[2:]} <= answer_words, (data.questions[q], data.answers[a])
  batch = next(distinct_batches(data.batch_keys, 1000, seed=0))
  assert len({data.pairs[i][1] for i in batch}) == 1000  # no answer twice, real or pseudo
  assert Pairs.source("insuranceqa_en_pseudo", "validation").pairs == \
      Pairs.insuranceqa("validation").pairs  # tuning pairs unchanged


def test_closure_of_literal_pairs(tmp_path):
  from t5rank import cli
  from t5rank.data.retrieval_task import closure_qrels
  pairs = [("a", "b", 1), ("b", "c", 1), ("d", "e", None), ("c", "f", 0)]
  qrels = closure_qrels(pairs)
  assert qrels == {"a": {"a": 1, "b": 1, "c": 1}, "b": {"a": 1, "b": 1, "c": 1},
                   "c": {"a": 1, "b": 1, "c": 1}, "d": {"d": 1, "e": 1}, "e": {"d": 1, "e": 1}}
  assert closure_qrels(pairs, self_relevant=False)["a"] == {"b": 1, "c": 1}
  (tmp_path / "pairs.tsv").write_text("a\tb\t1\nb\tc\t1\nd\te\n\nc\tf\t0\n")
  (tmp_path / "texts.tsv").write_text("".join(f"{x}\ttext of {x}\n" for x in "abcdefg"))
  out = tmp_path / "task"
  assert cli.main(["pairs-to-retrieval", "--pairs", str(tmp_path / "pairs.tsv"), "--texts",
                   str(tmp_path / "texts.tsv"), "--output", str(out), "--exclude-self"]) == 0
  assert (out / "queries.tsv").read_text().splitlines()[0] == "a\ttext of a"
  assert len((out / "corpus.jsonl").read_text().splitlines()) == 7  # every item a candidate
  assert "a 0 b 1" in (out / "qrels.txt").read_text()
  assert "a 0 a 1" not in (out / "qrels.txt").read_text()
  (tmp_path / "bad.tsv").write_text("a\tb\tyes\n")
  with pytest.raises(SystemExit, match="bad.tsv:1: the label must be an integer"):
    cli.main(["pairs-to-retrieval", "--pairs", str(tmp_path / "bad.tsv"), "--texts",
              str(tmp_path / "texts.tsv"), "--output", str(tmp_path / "x")])


def test_tfidf_by_hand():
  from t5rank.data.readers import Document
  from t5rank.retrieval.tfidf import TfIdf
  # idf(a) = ln(3/3) + 1 = 1, idf(b) = idf(c) = ln(3/2) + 1; doc1 = (1, idf_b)/norm; query "b"
  retriever = TfIdf.build({"d1": Document("a b"), "d2": Document("a c")})
  run = retriever.retrieve({"q": "B"}, k=10)
  idf = math.log(1.5) + 1
  assert [d for d, _ in run["q"]] == ["d1"]  # d2 shares no word: left out
  np.testing.assert_allclose(run["q"][0][1], idf / math.sqrt(1 + idf ** 2), rtol=1e-6)
  assert retriever.retrieve({"q": "b"}, candidates={"q": [("d2", 0.0), ("d1", 0.0)]})["q"][1] \
      == ("d2", 0.0)


def test_map_at_k_by_hand():
  from t5rank.evaluation.metrics import per_query
  qrels = {"q": {"r1": 1, "r2": 1, "r3": 1}}
  run = {"q": [("r1", 3.0), ("x", 2.0), ("r2", 1.0)]}  # relevant at ranks 1 and 3 of R = 3
  values = per_query(qrels, run, ["MAP@2", "MAP@3"])
  np.testing.assert_allclose(values["MAP@2"], [1 / 3])  # (1/3)(P@1)
  np.testing.assert_allclose(values["MAP@3"], [(1 + 2 / 3) / 3])  # (1/3)(P@1 + P@3)


def test_fusion_of_two_first_stages_fills_missing_candidates():
  from t5rank.ranking.fusion import interpolate
  first = {"q": [("a", 3.0), ("b", 1.0)]}
  second = {"q": [("b", 4.0), ("c", 2.0)]}
  with pytest.raises(ValueError, match="different candidates"):
    interpolate(first, second, 0.5, normalization="minmax")
  fused = dict(interpolate(first, second, 0.5, normalization="minmax", union=True)["q"])
  # first: a 3, b 1, c 1 (its floor) -> 1, 0, 0; second: b 4, c 2, a 2 (floor) -> 0, 1, 0
  assert fused == {"a": 0.5, "b": 0.5, "c": 0.0}
  # a query one first stage matched nothing for (absent from its file) keeps the other's ranking
  fused = interpolate(first, {"q": second["q"], "r": [("x", 1.0), ("y", 3.0)]}, 0.5,
                      normalization="minmax", union=True)
  assert [d for d, _ in fused["r"]] == ["y", "x"]


# ------------------------------------------------------------------------- the index, end to end

TEXTS = {"d1": "car insurance covers the car", "d2": "life insurance pays a death benefit",
         "d3": "an annuity pays income", "d4": "", "d5": "the deductible of car insurance"}


def embeddings_dir(tmp_path, seed=0):
  from t5rank.models.words import save_embeddings
  vocabulary = WordVocabulary.build(TEXTS.values(), min_count=1)
  vectors = np.random.default_rng(seed).normal(size=(vocabulary.size, 6)).astype(np.float32)
  vectors[:2] = 0
  path = tmp_path / f"emb{seed}"
  save_embeddings(str(path), vocabulary, vectors, {"source": "test"})
  return str(path)


def corpus_file(tmp_path):
  path = tmp_path / "corpus.jsonl"
  path.write_text("".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in TEXTS.items()))
  return str(path)


@pytest.mark.parametrize("weighting", ["uniform", "idf"])
def test_exact_flat_and_hnsw_search_agree_with_numpy(tmp_path, weighting):
  from t5rank.data.readers import Document
  from t5rank.retrieval.dense import DenseRetriever
  from t5rank.retrieval.encoders import load_encoder
  corpus = {d: Document(t) for d, t in TEXTS.items()}
  retriever = DenseRetriever.build(corpus, encoder_path=embeddings_dir(tmp_path),
                                   weighting=weighting)
  vectors = retriever.vectors
  np.testing.assert_array_equal(vectors[3], 0)  # the empty document
  assert np.isfinite(vectors).all()
  queries = {"q1": "car insurance", "q2": "death benefit pays", "q3": "annuity"}
  encoder = load_encoder(embeddings_dir(tmp_path), weighting=weighting,
                         idf_texts=list(TEXTS.values()))
  q = encoder.encode(list(queries.values()), "query")
  expected = q @ vectors.T  # cosines: unit rows
  runs = {}
  for search in ("exact", "flat", "hnsw"):
    retriever.search = search
    runs[search] = retriever.retrieve(queries, k=5)
  for i, qid in enumerate(queries):
    order = sorted(TEXTS, key=lambda d: (-expected[i, list(TEXTS).index(d)], d))
    for search, run in runs.items():
      assert [d for d, _ in run[qid]] == order, search
      np.testing.assert_allclose([s for _, s in run[qid]], sorted(expected[i], reverse=True)[:5],
                                 atol=1e-5)
  assert retriever.retrieve({"q": "zzz unknown"}, k=5) == {"q": []}  # nothing to match


def test_index_resumes_and_refuses_another_encoder(tmp_path, monkeypatch):
  from t5rank import cli
  from t5rank.retrieval import encoders
  emb, other = embeddings_dir(tmp_path, 0), embeddings_dir(tmp_path, 1)
  corpus = corpus_file(tmp_path)
  index = str(tmp_path / "index")
  # An interrupted run: the first shard is saved, then encoding fails.
  calls = []
  original = encoders.WordAverage.encode

  def failing(self, texts, side):
    calls.append(len(texts))
    if len(calls) == 2:
      raise KeyboardInterrupt
    return original(self, texts, side)

  monkeypatch.setattr(encoders.WordAverage, "encode", failing)
  with pytest.raises(KeyboardInterrupt):
    cli.main(["index", "--encoder", emb, "--corpus", corpus, "--output", index,
              "--shard-size", "2"])
  assert (tmp_path / "index.partial" / "shard-00000.npz").exists()
  calls.clear()
  monkeypatch.setattr(encoders.WordAverage, "encode",
                      lambda self, texts, side: calls.append(len(texts)) or original(self, texts,
                                                                                     side))
  assert cli.main(["index", "--encoder", emb, "--corpus", corpus, "--output", index,
                   "--shard-size", "2"]) == 0
  assert calls == [2, 1]  # shards 2 and 3 only: shard 1 was reused
  assert not (tmp_path / "index.partial").exists()
  whole = tmp_path / "whole"
  assert cli.main(["index", "--encoder", emb, "--corpus", corpus, "--output", str(whole)]) == 0
  np.testing.assert_array_equal(np.load(f"{index}/vectors.npy"), np.load(f"{whole}/vectors.npy"))
  queries = tmp_path / "queries.tsv"
  queries.write_text("q1\tcar insurance\nq2\tannuity income\n")
  out = tmp_path / "dense.run"
  assert cli.main(["retrieve", "--dense", index, "--queries", str(queries), "--output", str(out),
                   "--depth", "3", "--search", "flat"]) == 0
  lines = out.read_text().splitlines()
  assert len(lines) == 6 and lines[0].split()[0] == "q1" and lines[0].split()[-1] == "dense"
  with pytest.raises(SystemExit, match="built with another encoder"):
    cli.main(["retrieve", "--dense", index, "--encoder", other, "--queries", str(queries),
              "--output", str(tmp_path / "x.run")])


def test_the_trainer_trains_a_dual_encoder_that_indexes(tmp_path):
  from t5rank import cli
  from t5rank.retrieval.encoders import load_encoder
  from t5rank.training import dual, trainer
  emb = embeddings_dir(tmp_path)
  texts = list(TEXTS.values())
  data = dual.Pairs(questions=["car cover", "death pays", "income annuity", "deductible car"],
                    answers=texts, pairs=[(0, 0), (1, 1), (2, 2), (3, 4), (0, 4)],
                    negatives=[[1], [0], [4], [1]])
  config = de.dual_encoder_config(emb, embedding_dim=6, max_query_length=8,
                                  max_document_length=16)

  def dataset(task_name, *, batch_size, feature_lengths, seed, start_step, pack, shard_index,
              num_shards):
    return dual.pair_batches(data, dual.Encoder(dual.load_words(config)), config,
                             batch_size=batch_size,
                             seed=seed, start_step=start_step, shard_index=shard_index,
                             num_shards=num_shards)

  model_dir = str(tmp_path / "run")
  metrics = trainer.train(
      model_config=config, task_name="insuranceqa_en",
      feature_lengths={"query": 8, "document": 16}, train_steps=3, batch_size=2,
      model_dir=model_dir, mesh_shape=(1, 1), init=trainer.Init(checkpoint=emb),
      optimization=trainer.Optimization(learning_rate=0.1, optimizer=dual.momentum_sgd,
                                        dropout_rate=0.0),
      loop=trainer.Loop(log_every=1, eval_every=3, keep_best="p@1",
                        eval_fn=dual.InBatchEval(batch_size=2, data=data)),
      dataset_fn=dataset)
  assert np.isfinite(metrics["loss"]) and 0 <= metrics["eval/p@1"] <= 1
  encoder = load_encoder(f"{model_dir}/final")
  assert encoder.max_lengths == {"query": 8, "document": 16}
  index = str(tmp_path / "index")
  assert cli.main(["index", "--encoder", f"{model_dir}/final", "--corpus", corpus_file(tmp_path),
                   "--output", index]) == 0
  (tmp_path / "queries.tsv").write_text("q1\tcar insurance\n")
  with pytest.raises(SystemExit, match="built with another encoder"):
    cli.main(["retrieve", "--dense", index, "--encoder", emb, "--queries",
              str(tmp_path / "queries.tsv"), "--output", str(tmp_path / "x.run")])
  with pytest.raises(ValueError, match="IDF weighting is for `t5rank embeddings` vectors; a trained model encodes as it was trained"):
    load_encoder(f"{model_dir}/final", weighting="idf")
  with pytest.raises(ValueError, match="evaluation reads en ones"):
    dual.DualEncoder(config).check("insuranceqa_zh", trainer.Init(), trainer.Optimization(
        dropout_rate=0.0), trainer.Loop(eval_fn=dual.InBatchEval(batch_size=2, data=data)))
  eval_enzh = dual.InBatchEval(batch_size=2, data=data)
  eval_enzh.language = "enzh"
  dual.DualEncoder(config).check("insuranceqa_enzh_mixed", trainer.Init(), trainer.Optimization(
      dropout_rate=0.0), trainer.Loop(eval_fn=eval_enzh))  # an in-batch loss: accepted
  with pytest.raises(ValueError, match="language would tell the positive"):
    dual.DualEncoder(config.replace(loss="cross_entropy")).check(
        "insuranceqa_enzh_mixed", trainer.Init(), trainer.Optimization(dropout_rate=0.0),
        trainer.Loop(eval_fn=eval_enzh))


def test_the_trainer_takes_pool_negatives_as_extra_columns(tmp_path):
  from t5rank.training import dual, trainer
  emb = embeddings_dir(tmp_path)
  data = dual.Pairs(questions=["car cover", "death pays", "income annuity", "deductible car"],
                    answers=list(TEXTS.values()), pairs=[(0, 0), (1, 1), (2, 2), (3, 4)],
                    negatives=[[1, 3], [0, 3], [4, 3], [1, 3]])
  config = de.dual_encoder_config(emb, embedding_dim=6, max_query_length=8,
                                  max_document_length=16, loss="in_batch_softmax_pool")
  batches = dual.pair_batches(data, dual.Encoder(dual.load_words(config)), config, batch_size=2,
                              seed=0)
  batch = next(batches)
  assert batch["query"].shape == (2, 8) and batch["document"].shape == (4, 16)  # B answers + B
  encoder = dual.Encoder(dual.load_words(config))
  chosen = [data.pairs[i] for i in next(dual.distinct_batches(data.batch_keys, 2, seed=0))]
  np.testing.assert_array_equal(  # columns 0..B-1: the rows' own answers, in row order
      batch["document"][:2], encoder([data.answers[a] for _, a in chosen], 16)[:, :16])
  for (q, a), row in zip(chosen, batch["document"][2:]):  # then one negative of each row's pool
    pool = [n for n in data.negatives[q] if n not in {b for _, b in chosen}]
    assert any(np.array_equal(row, encoder([data.answers[n]], 16)[0]) for n in pool)
  with pytest.raises(ValueError, match="on one host"):
    next(dual.pair_batches(data, dual.Encoder(dual.load_words(config)), config, batch_size=2,
                           seed=0, num_shards=2))

  def dataset(task_name, *, batch_size, feature_lengths, seed, start_step, pack, shard_index,
              num_shards):
    return dual.pair_batches(data, dual.Encoder(dual.load_words(config)), config,
                             batch_size=batch_size, seed=seed, start_step=start_step)

  metrics = trainer.train(
      model_config=config, task_name="insuranceqa_en",
      feature_lengths={"query": 8, "document": 16}, train_steps=2, batch_size=2,
      model_dir=str(tmp_path / "run"), mesh_shape=(1, 1), init=trainer.Init(checkpoint=emb),
      optimization=trainer.Optimization(learning_rate=0.1, optimizer=dual.momentum_sgd,
                                        dropout_rate=0.0),
      loop=trainer.Loop(log_every=1, eval_every=2, keep_best="p@1",
                        eval_fn=dual.InBatchEval(batch_size=2, data=data)),
      dataset_fn=dataset)
  assert np.isfinite(metrics["loss"]) and metrics["loss"] > 0


def test_t5_variant_trains_from_a_t5_checkpoint_and_indexes(tmp_path):
  from t5rank import cli
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.retrieval.encoders import T5Mean, load_encoder
  from t5rank.testing import micro_config, random_params
  from t5rank.training import dual, trainer
  t5 = str(tmp_path / "t5")
  save_checkpoint(t5, random_params(micro_config(), std=0.2), micro_config())
  plain = load_encoder(t5)  # a T5 checkpoint as a retriever, untrained
  assert isinstance(plain, T5Mean)
  alone = plain.encode([TEXTS["d3"]], "document")
  padded = plain.encode([TEXTS["d3"], TEXTS["d2"] * 3], "document")  # d3 padded in this batch
  np.testing.assert_allclose(alone[0], padded[0], atol=1e-5)  # padding is not averaged in
  np.testing.assert_allclose(np.linalg.norm(padded, axis=1), 1, rtol=1e-5)
  from t5rank.models.dual_encoder import t5_dual_encoder_config
  config = t5_dual_encoder_config(t5, max_query_length=8, max_document_length=32)
  texts = list(TEXTS.values())
  data = dual.Pairs(questions=["car cover", "death pays", "income annuity"], answers=texts,
                    pairs=[(0, 0), (1, 1), (2, 2)], negatives=[[1], [0], [4]])
  model = dual.T5DualEncoder(config)

  def dataset(task_name, *, batch_size, feature_lengths, seed, start_step, pack, shard_index,
              num_shards):
    return dual.pair_batches(data, model.text_encoder(), config, batch_size=batch_size,
                             seed=seed, start_step=start_step)

  model_dir = str(tmp_path / "run")
  metrics = trainer.train(
      model_config=config, task_name="insuranceqa_en",
      feature_lengths={"query": 8, "document": 32}, train_steps=2, batch_size=2,
      model_dir=model_dir, mesh_shape=(1, 1), init=trainer.Init(checkpoint=t5),
      optimization=trainer.Optimization(learning_rate=0.01, optimizer=dual.momentum_sgd,
                                        dropout_rate=0.0),
      loop=trainer.Loop(log_every=1, eval_every=2, eval_fn=dual.InBatchEval(batch_size=2,
                                                                            data=data)),
      dataset_fn=dataset)
  assert np.isfinite(metrics["loss"]) and 0 <= metrics["eval/p@1"] <= 1
  trained = load_encoder(f"{model_dir}/final")
  assert isinstance(trained, T5Mean) and trained.fingerprint != plain.fingerprint
  assert trained.max_lengths == {"query": 8, "document": 32}
  assert cli.main(["index", "--encoder", f"{model_dir}/final", "--corpus", corpus_file(tmp_path),
                   "--output", str(tmp_path / "index")]) == 0
  vectors = np.load(tmp_path / "index" / "vectors.npy")
  np.testing.assert_allclose(vectors, trained.encode(texts, "document"), atol=1e-5)


def test_retrieve_tfidf_through_the_cli_and_dense_options_without_an_index(tmp_path):
  from t5rank import cli
  queries = tmp_path / "queries.tsv"
  queries.write_text("q1\tcar deductible\n")
  out = tmp_path / "tfidf.run"
  assert cli.main(["retrieve", "--tfidf", "--corpus", corpus_file(tmp_path), "--queries",
                   str(queries), "--output", str(out), "--depth", "2"]) == 0
  lines = [line.split() for line in out.read_text().splitlines()]
  assert [line[2] for line in lines] == ["d5", "d1"] and lines[0][-1] == "tfidf"
  with pytest.raises(SystemExit, match="options of --dense"):
    cli.main(["retrieve", "--corpus", corpus_file(tmp_path), "--queries", str(queries),
              "--output", str(tmp_path / "other.run"), "--search", "hnsw"])
  with pytest.raises(SystemExit, match="--corpus is required"):
    cli.main(["retrieve", "--queries", str(queries), "--output", str(tmp_path / "other.run")])


def test_an_ensemble_index_scores_the_mean_of_the_models_cosines(load_benchmark):
  from types import SimpleNamespace

  bench = load_benchmark("experiments/dense_ensemble")

  def model(query_vectors, document_vectors):  # unit vectors, as an index holds them
    return SimpleNamespace(docids=["a", "b"], vectors=np.asarray(document_vectors, np.float32),
                           encoder=SimpleNamespace(encode=lambda texts, side: np.asarray(
                               query_vectors, np.float32)))

  # model 1: cos(q, a) = 1, cos(q, b) = 0; model 2: cos(q, a) = .6, cos(q, b) = .8
  first = model([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]])
  second = model([[0.6, 0.8]], [[1.0, 0.0], [0.0, 1.0]])
  queries, documents = bench.ensemble_vectors([first, second], ["q"])
  np.testing.assert_allclose(queries @ documents.T, [[0.8, 0.4]], rtol=1e-6)  # (1+.6)/2, (0+.8)/2
  np.testing.assert_allclose(np.linalg.norm(documents, axis=1), 1.0, rtol=1e-6)
  other = SimpleNamespace(docids=["b", "a"], vectors=second.vectors, encoder=second.encoder)
  with pytest.raises(ValueError, match="different documents"):
    bench.ensemble_vectors([first, other], ["q"])


@pytest.mark.parametrize("variant", ["words", "t5"])
def test_t5rank_score_ranks_by_the_cosine_the_index_computes(tmp_path, variant):
  """The dual encoder as a Reranker: `t5rank score` gives each candidate the cosine of its query's
  and its own vectors, the numbers the dense index computes for the same candidates."""
  from t5rank import cli
  from t5rank.data.readers import Document, read_run
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.retrieval.dense import DenseRetriever
  from t5rank.testing import micro_config, random_params

  checkpoint = str(tmp_path / "de")
  if variant == "words":
    from t5rank.models.words import WORDS_FILE
    config = de.dual_encoder_config(embeddings_dir(tmp_path), embedding_dim=6)
    (tmp_path / "de").mkdir()
    WordVocabulary.load(config.words).save(str(tmp_path / "de" / WORDS_FILE))
    params = jax.tree.map(np.asarray, de.init_params(config, jax.random.PRNGKey(3)))
    save_checkpoint(checkpoint, params, config, {"model": "dual_encoder"})
  else:
    from t5rank.models.dual_encoder import t5_dual_encoder_config
    from t5rank.training.dual import T5DualEncoder
    from t5rank.training.trainer import Init
    t5 = str(tmp_path / "t5")
    save_checkpoint(t5, random_params(micro_config(), std=0.2), micro_config())
    config = t5_dual_encoder_config(t5, max_query_length=8, max_document_length=32)
    trainable = T5DualEncoder(config)
    trainable.export(checkpoint, jax.tree.map(np.asarray, trainable.init_params(
        jax.random.PRNGKey(0), Init(checkpoint=t5))), {"step": 0})
  queries = tmp_path / "queries.tsv"
  queries.write_text("q1\tcar insurance\nq2\tdeath benefit of a life policy\n")
  candidates = {"q1": ["d1", "d2", "d3"], "q2": ["d2", "d4", "d5", "d1"]}
  (tmp_path / "cand.run").write_text("".join(f"{q} Q0 {d} {r + 1} 0 x\n" for q, ds in
                                             candidates.items() for r, d in enumerate(ds)))
  out = tmp_path / "out.run"
  assert cli.main(["score", "--checkpoint", checkpoint, "--queries", str(queries), "--corpus",
                   corpus_file(tmp_path), "--run", str(tmp_path / "cand.run"), "--output",
                   str(out), "--window", "0"]) == 0
  scored = read_run(str(out))
  # each shard's distinct texts encoded once, in batches of one text, pairs in batches of 8 rows
  small = tmp_path / "small.run"
  assert cli.main(["score", "--checkpoint", checkpoint, "--queries", str(queries), "--corpus",
                   corpus_file(tmp_path), "--run", str(tmp_path / "cand.run"), "--output",
                   str(small), "--window", "0", "--batch-tokens", "8", "--shard-size", "3"]) == 0
  for q, docs in read_run(str(small)).items():
    np.testing.assert_allclose([s for _, s in docs], [s for _, s in scored[q]], atol=1e-6)
  index = DenseRetriever.build({d: Document(t) for d, t in TEXTS.items()}, encoder_path=checkpoint)
  cosines = index.retrieve({"q1": "car insurance", "q2": "death benefit of a life policy"},
                           candidates={q: [(d, 0.0) for d in ds] for q, ds in candidates.items()})
  for q in candidates:
    assert [d for d, _ in scored[q]] == [d for d, _ in cosines[q]]
    np.testing.assert_allclose([s for _, s in scored[q]], [s for _, s in cosines[q]], atol=1e-6)
    assert len({round(s, 6) for _, s in scored[q]}) == len(candidates[q])  # the cosines differ
