"""Distillation (Hofstätter et al. 2020): Margin-MSE on numbers worked by hand; a teacher's scores
read back as triples carrying both scores; TK trained on them by Margin-MSE of its own scores;
`t5rank teacher` scores exactly what `t5rank score` scores."""

from __future__ import annotations

import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from t5rank import cli
from t5rank.data import teacher as teacher_data
from t5rank.data import tk_triples
from t5rank.files import sha256_file
from t5rank.models import tk
from t5rank.models.words import WordVocabulary
from t5rank.training import pairwise

TEXTS = ["the car insurance covers the car", "life insurance pays a death benefit",
         "an annuity pays income", "the deductible of car insurance", "what does life insurance pay",
         "does car insurance cover rental cars"]


def test_margin_mse_by_hand():
  # student margins 2 - 0 = 2 and 0.5 - 1 = -0.5; teacher margins 1 - 0 = 1 and 0 - 2 = -2;
  # squared differences 1 and 2.25, mean 1.625
  loss = pairwise.margin_mse(jnp.array([2.0, 0.5]), jnp.array([0.0, 1.0]), jnp.array([1.0, 0.0]),
                             jnp.array([0.0, 2.0]))
  np.testing.assert_allclose(loss, 1.625)
  # only the margins count: shifting either model's two scores together changes nothing
  np.testing.assert_allclose(pairwise.margin_mse(jnp.array([12.0, 3.5]), jnp.array([10.0, 4.0]),
                                                 jnp.array([-4.0, 7.0]), jnp.array([-5.0, 9.0])),
                             1.625)


def write_teacher(directory, scores: dict) -> None:
  """A teacher directory by hand: q1 (relevant d0) and q2 (relevant d1), `scores` {(q, d): t}."""
  data = directory / "data"
  data.mkdir(parents=True)
  (data / "queries.tsv").write_text(f"q1\t{TEXTS[4]}\nq2\t{TEXTS[5]}\n")
  (data / "corpus.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                                             for i, t in enumerate(TEXTS[:4])))
  (data / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d0 1\n")
  (directory / "scores.run").write_text("".join(
      f"{q} Q0 {d} {r} {s} teacher\n" for r, ((q, d), s) in enumerate(scores.items(), 1)))
  (directory / "teacher.json").write_text(json.dumps(
      {"scores_sha256": sha256_file(str(directory / "scores.run"))}))


SCORES = {("q1", "d1"): -0.5, ("q1", "d2"): -3.0, ("q1", "d3"): -1.0,
          ("q2", "d0"): -0.25, ("q2", "d2"): -4.0}


def test_a_teachers_scores_are_triples_that_carry_both_scores(tmp_path):
  write_teacher(tmp_path / "t", SCORES)
  table = teacher_data.teacher_table(str(tmp_path / "t"))
  assert table.scored and len(table) == 2
  seen = set()
  for query, positive, negative, t_pos, t_neg in table.triples(seed=3, num_epochs=20):
    q = "q1" if query == TEXTS[4] else "q2"
    d_pos, d_neg = (f"d{TEXTS.index(positive)}", f"d{TEXTS.index(negative)}")
    assert (t_pos, t_neg) == (SCORES[(q, d_pos)], SCORES[(q, d_neg)])
    seen.add((q, d_pos, d_neg))
  assert seen == {("q1", "d1", "d2"), ("q1", "d1", "d3"), ("q2", "d0", "d2")}  # every pool pair
  name = tk_triples.teacher_task(str(tmp_path / "t"))
  assert name == "teacher:" + str(tmp_path / "t") and tk_triples.SOURCES[name]() is table
  (tmp_path / "t" / "scores.run").write_text("q1 Q0 d1 1 9.0 teacher\n")
  with pytest.raises(ValueError, match="scores.run is not the file"):
    teacher_data.read_teacher(str(tmp_path / "t"))


def test_tk_trains_by_margin_mse_of_its_scores_on_a_teachers_triples(tmp_path):
  from t5rank.training import trainer

  vocabulary = WordVocabulary.build(TEXTS, min_count=1)
  (tmp_path / "words").mkdir()
  vocabulary.save(str(tmp_path / "words" / "words.tsv"))
  config = tk.TKConfig(vocab_size=vocabulary.size, vocabulary_sha256=vocabulary.sha256,
                       embedding_dim=8, num_heads=2, head_dim=4, ff_dim=8, max_query_length=6,
                       max_document_length=12, words=str(tmp_path / "words"))
  write_teacher(tmp_path / "t", SCORES)
  table = teacher_data.teacher_table(str(tmp_path / "t"))
  batch = next(tk_triples.tk_batches(table, vocabulary, batch_size=4, query_length=6,
                                     document_length=12, seed=0))
  assert batch["positive_score"].dtype == np.float32 and batch["positive_score"].shape == (4,)
  student = pairwise.PairwiseTK(config)
  params = tk.init_tk_params(config, jax.random.PRNGKey(0))
  loss, metrics = student.loss_and_metrics(params, batch, None)
  network = tk.TKNetwork(config)

  def score(query, doc):
    apply = lambda *a, **k: network.apply({"params": params}, *a, **k)
    q, d = apply(query, method=tk.TKNetwork.encode), apply(doc, method=tk.TKNetwork.encode)
    return apply(q, query > 0, d, doc > 0, method=tk.TKNetwork.score)[0]

  s_pos, s_neg = score(batch["query"], batch["positive"]), score(batch["query"], batch["negative"])
  margins = (np.asarray(s_pos) - np.asarray(s_neg)
             - (batch["positive_score"] - batch["negative_score"]))
  np.testing.assert_allclose(loss, np.mean(margins ** 2), rtol=1e-5)
  np.testing.assert_allclose(metrics["hinge"], pairwise.hinge_loss(s_pos, s_neg), rtol=1e-5)

  def dataset(task_name, *, batch_size, feature_lengths, seed, start_step, pack, shard_index,
              num_shards):
    return tk_triples.tk_batches(table, vocabulary, batch_size=batch_size,
                                 query_length=feature_lengths["query"],
                                 document_length=feature_lengths["document"], seed=seed,
                                 start_step=start_step)

  final = trainer.train(
      model_config=config, task_name="insuranceqa_en", feature_lengths={"query": 6, "document": 12},
      train_steps=3, batch_size=4, model_dir=str(tmp_path / "run"), mesh_shape=(1, 1),
      optimization=trainer.Optimization(learning_rate=1e-2, optimizer=pairwise.tk_adam,
                                        dropout_rate=0.0),
      loop=trainer.Loop(log_every=1, checkpoint_every=3), dataset_fn=dataset)
  assert np.isfinite(final["loss"]) and "teacher_accuracy" in final


def test_the_teacher_command_scores_what_t5rank_score_scores(tmp_path):
  from t5rank.data.insuranceqa import load_split
  from t5rank.data.readers import read_qrels, read_run
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.testing import micro_config, random_params

  config = micro_config()
  save_checkpoint(str(tmp_path / "mono"), random_params(config, std=0.5), config)
  out = tmp_path / "teacher"
  assert cli.main(["teacher", "--checkpoint", str(tmp_path / "mono"), "--queries", "4",
                   "--negatives", "2", "-o", str(out)]) == 0
  info = json.loads((out / "teacher.json").read_text())
  assert info["split"] == "train" and info["queries"] == 4 and info["negatives"] == 2
  candidates = read_run(str(out / "candidates.run"))
  split = load_split("train", "en", 4)
  qrels = read_qrels(str(out / "data" / "qrels.txt"))
  for qid, docs in candidates.items():
    relevant = [d for d, _ in docs if d in qrels[qid]]
    assert sorted(relevant) == sorted(split.relevant[qid])  # every relevant answer
    others = [d for d, _ in docs if d not in qrels[qid]]
    assert len(others) == 2 and set(others) <= set(split.negatives[qid])  # two of its pool
  assert cli.main(["score", "--checkpoint", str(tmp_path / "mono"), "--queries",
                   str(out / "data" / "queries.tsv"), "--corpus", str(out / "data" / "corpus.jsonl"),
                   "--run", str(out / "candidates.run"), "--window", "0", "-o",
                   str(tmp_path / "check.run")]) == 0
  assert read_run(str(out / "scores.run")) == read_run(str(tmp_path / "check.run"))
  assert os.path.isdir(out / "index")

  # a fused teacher: BM25 and the model, z-scores per question weighted .3 / .7
  from t5rank.ranking.fusion import interpolate_runs
  fused = tmp_path / "fused"
  assert cli.main(["teacher", "--checkpoint", "bm25", "--checkpoint", str(tmp_path / "mono"),
                   "--weights", "0.3,0.7", "--queries", "4", "--negatives", "2", "-o",
                   str(fused)]) == 0
  expected = interpolate_runs([candidates, read_run(str(fused / "members" / "01.run"))],
                              [0.3, 0.7])
  assert read_run(str(fused / "members" / "01.run")) == read_run(str(out / "scores.run"))
  got = read_run(str(fused / "scores.run"))
  assert {q: [d for d, _ in docs] for q, docs in got.items()} == {
      q: [d for d, _ in docs] for q, docs in expected.items()}
  for q in got:
    np.testing.assert_allclose([s for _, s in got[q]], [s for _, s in expected[q]], rtol=1e-12)
  assert json.loads((fused / "teacher.json").read_text())["teacher"]["weights"] == [0.3, 0.7]
  with pytest.raises(SystemExit, match="one weight each"):
    cli.main(["teacher", "--checkpoint", "bm25", "--checkpoint", str(tmp_path / "mono"), "-o",
              str(tmp_path / "bad")])


def test_bm25_alone_is_no_teacher(tmp_path):
  with pytest.raises(SystemExit, match="BM25 alone is no teacher"):
    cli.main(["teacher", "--checkpoint", "bm25", "-o", str(tmp_path / "t")])


def test_the_dual_encoders_distillation_loss_by_hand():
  from t5rank.models import dual_encoder as de
  # two questions, four answers: the two positives (columns 0, 1), then one pool negative each
  # (columns 2, 3), which enter the Margin-MSE only. The in-batch softmax is over columns 0, 1:
  # row 1 -log(e^.8 / (e^.8 + e^.1)) = .40319, row 2 -log(e^.5 / (e^.3 + e^.5)) = .59814
  cos = jnp.array([[0.8, 0.1, 0.6, -0.2], [0.3, 0.5, 0.7, 0.0]])
  q, d = jnp.eye(2), cos.T
  softmax = (math.log1p(math.exp(0.1 - 0.8)) + math.log1p(math.exp(0.3 - 0.5))) / 2
  assert abs(softmax - 0.500662) < 1e-6
  # student margins at α = 1, β = .5 (β cancels): .8 - .6 = .2 and .5 - 0 = .5; teacher margins
  # 3 - 1.8 = 1.2 and -1 - -1.5 = .5: squared differences 1 and 0, mean .5, weight 2: + 1
  teacher = {"positive_score": jnp.array([3.0, -1.0]), "negative_score": jnp.array([1.8, -1.5]),
             "score_mask": jnp.array([1.0, 1.0])}
  loss, accuracy = de.vector_loss(q, d, jnp.asarray(1.0), jnp.asarray(0.5),
                                  "in_batch_softmax_margin_mse", 0.5, teacher=teacher,
                                  margin_mse_weight=2.0)
  np.testing.assert_allclose(loss, softmax + 1.0, atol=1e-6)
  assert float(accuracy) == 1.0  # in-batch: each positive tops its row's two answers
  # a row whose negative the teacher did not score counts in the softmax only: row 1's 1 alone
  loss, _ = de.vector_loss(q, d, jnp.asarray(1.0), jnp.asarray(0.5),
                           "in_batch_softmax_margin_mse", 0.5,
                           teacher=dict(teacher, score_mask=jnp.array([1.0, 0.0])),
                           margin_mse_weight=2.0)
  np.testing.assert_allclose(loss, softmax + 2.0, atol=1e-6)
  # α scales the softmax's logits and, without a scale of its own, the student's margins: at
  # α = 2, 2 x .2 - 1.2 = -.8 and 2 x .5 - .5 = .5
  at_2 = (math.log1p(math.exp(2 * (0.1 - 0.8))) + math.log1p(math.exp(2 * (0.3 - 0.5)))) / 2
  loss, _ = de.vector_loss(q, d, jnp.asarray(2.0), jnp.asarray(0.0),
                           "in_batch_softmax_margin_mse", 0.5, teacher=teacher)
  np.testing.assert_allclose(loss, at_2 + (0.64 + 0.25) / 2, atol=1e-6)
  # with a scale of its own, γ = 4: 4 x .2 - 1.2 = -.4 and 4 x .5 - .5 = 1.5, and α is the softmax's
  loss, _ = de.vector_loss(q, d, jnp.asarray(2.0), jnp.asarray(0.0),
                           "in_batch_softmax_margin_mse", 0.5, teacher=teacher,
                           margin_scale=jnp.asarray(4.0))
  np.testing.assert_allclose(loss, at_2 + (0.16 + 2.25) / 2, atol=1e-6)
  with pytest.raises(ValueError, match="teacher"):
    de.vector_loss(q, d, jnp.asarray(1.0), jnp.asarray(0.0), "in_batch_softmax_margin_mse", 0.5)


def test_the_dual_encoder_trains_on_a_teachers_pairs_and_their_scores(tmp_path):
  from t5rank.data import dual_pairs
  from t5rank.models import dual_encoder as de
  from t5rank.models.words import save_embeddings
  from t5rank.training import dual, trainer

  write_teacher(tmp_path / "t", SCORES)
  task = tk_triples.teacher_task(str(tmp_path / "t"))
  data = dual_pairs.Pairs.source(task, "train")
  assert dual_pairs.pair_source(task) == ("en", "teacher")
  # q1 (TEXTS[4]) with its relevant d1 (TEXTS[1]), pool d2, d3; q2 (TEXTS[5]) with d0, pool d2
  by_text = {(data.questions[q], data.answers[a]): s for (q, a), s in data.scores.items()}
  assert by_text == {(TEXTS[4], TEXTS[1]): -0.5, (TEXTS[4], TEXTS[2]): -3.0,
                     (TEXTS[4], TEXTS[3]): -1.0, (TEXTS[5], TEXTS[0]): -0.25,
                     (TEXTS[5], TEXTS[2]): -4.0}
  vocabulary = WordVocabulary.build(TEXTS, min_count=1)
  vectors = np.random.default_rng(0).normal(size=(vocabulary.size, 6)).astype(np.float32)
  save_embeddings(str(tmp_path / "emb"), vocabulary, vectors, {"source": "test"})
  config = de.dual_encoder_config(str(tmp_path / "emb"), embedding_dim=6, max_query_length=8,
                                  max_document_length=16, loss="in_batch_softmax_margin_mse")
  encoder = dual.Encoder(dual.load_words(config))
  masks = set()
  for _, batch in zip(range(6), dual_pairs.pair_batches(data, encoder, config, batch_size=2,
                                                        seed=0)):
    assert batch["document"].shape == (4, 16)
    for row in range(2):  # each row's scores are the teacher's of its question and two answers
      question = next(t for t in TEXTS[4:] if np.array_equal(encoder([t], 8)[0],
                                                             batch["query"][row]))
      answer = lambda column: next(t for t in TEXTS[:4] if np.array_equal(
          encoder([t], 16)[0], batch["document"][column]))
      assert batch["positive_score"][row] == by_text[(question, answer(row))]
      negative = by_text.get((question, answer(2 + row)))
      assert batch["score_mask"][row] == (negative is not None)
      assert batch["negative_score"][row] == (negative or 0.0)
      masks.add(float(batch["score_mask"][row]))
  # when q1 draws d2, q2's pool is empty and its negative is an answer the teacher did not score
  assert masks == {0.0, 1.0}
  student = dual.DualEncoder(config)
  student.check(task, trainer.Init(), trainer.Optimization(dropout_rate=0.0),
                trainer.Loop(eval_fn=dual.InBatchEval(batch_size=2, data=data)))
  with pytest.raises(ValueError, match="teacher"):  # a teacher's pairs need the distillation loss
    dual.DualEncoder(config.replace(loss="in_batch_softmax_pool")).check(
        task, trainer.Init(), trainer.Optimization(dropout_rate=0.0),
        trainer.Loop(eval_fn=dual.InBatchEval(batch_size=2, data=data)))
  unscored = dual_pairs.Pairs(data.questions, data.answers, data.pairs, data.negatives)
  with pytest.raises(ValueError, match="teacher"):  # and the loss a teacher's pairs
    next(dual_pairs.pair_batches(unscored, encoder, config, batch_size=2, seed=0))

  def dataset(task_name, *, batch_size, feature_lengths, seed, start_step, pack, shard_index,
              num_shards):
    return dual_pairs.pair_batches(data, encoder, config, batch_size=batch_size, seed=seed,
                                   start_step=start_step)

  metrics = trainer.train(
      model_config=config, task_name=task, feature_lengths={"query": 8, "document": 16},
      train_steps=3, batch_size=2, model_dir=str(tmp_path / "run"), mesh_shape=(1, 1),
      init=trainer.Init(checkpoint=str(tmp_path / "emb")),
      optimization=trainer.Optimization(learning_rate=0.1, optimizer=dual.momentum_sgd,
                                        dropout_rate=0.0),
      loop=trainer.Loop(log_every=1, eval_every=3, keep_best="p@1",
                        eval_fn=dual.InBatchEval(batch_size=2, data=data)),
      dataset_fn=dataset)
  assert np.isfinite(metrics["loss"]) and metrics["loss"] > 0
  assert "margin_scale" in metrics  # γ, learned beside α
  # a run may start from a dual encoder trained with or without γ: γ comes with the loss
  plain = dual.DualEncoder(config.replace(loss="in_batch_softmax"))
  params = plain.init_params(jax.random.PRNGKey(0),
                             trainer.Init(checkpoint=str(tmp_path / "run" / "final")))
  assert "margin_scale" not in params
  plain.export(str(tmp_path / "plain"), params, {"step": 3})
  again = student.init_params(jax.random.PRNGKey(1),
                              trainer.Init(checkpoint=str(tmp_path / "plain")))
  assert float(again["margin_scale"]) == config.scale_init  # a fresh γ
  np.testing.assert_array_equal(again["query"]["embedding"], params["query"]["embedding"])


def test_a_distilled_models_recipe_hash_covers_its_teacher_not_the_scores_path():
  from t5rank.training import gin_config
  gin_file = ["gin/experiments/tk_distill_insuranceqa_cpu.gin"]
  a = gin_config.model_recipe(gin_file, [], teacher_sha256="a" * 64)
  assert a["teacher_sha256"] == "a" * 64
  moved = gin_config.model_recipe(gin_file, ["TEACHER_SCORES = '/elsewhere/teacher'"],
                                  teacher_sha256="a" * 64)
  assert moved["sha256"] == a["sha256"]  # the path given is replaced by the scores' hash
  assert gin_config.model_recipe(gin_file, [], teacher_sha256="b" * 64)["sha256"] != a["sha256"]
  plain = gin_config.model_recipe(["gin/experiments/tk_insuranceqa_cpu.gin"], [])
  assert "teacher_sha256" not in plain  # an undistilled model's recipe is as it was


def test_a_teachers_recipe_hash_names_what_made_its_scores_not_where_or_their_last_digits():
  info = json.loads(json.dumps({  # teacher.json of a fused teacher, as `t5rank teacher` writes it
      "teacher": {"fusion": [{"checkpoint": "bm25", "k1": 0.9, "b": 0.4},
                             {"checkpoint": "shipped:tk", "model": "tk", "params_sha256": "p1",
                              "recipe_sha256": "r1"},
                             {"checkpoint": "/runs/mono/final", "model": "monot5",
                              "params_sha256": "p2", "recipe_sha256": None}],
                  "weights": [0.05, 0.55, 0.4], "normalization": "zscore"},
      "split": "train", "language": "en", "negatives": 20, "seed": 0, "queries": 3, "pairs": 60,
      "scores_sha256": "s", "qrels_sha256": "q", "seconds": 1.0}))
  h = teacher_data.teacher_recipe_sha256(info)
  elsewhere = json.loads(json.dumps(info))  # other paths, another machine's scores and time
  elsewhere["teacher"]["fusion"][1]["checkpoint"] = "/copies/tk"
  elsewhere["teacher"]["fusion"][1]["params_sha256"] = "p1 retrained"  # the recipe names it
  elsewhere.update(scores_sha256="s2", seconds=9.0)
  assert teacher_data.teacher_recipe_sha256(elsewhere) == h
  for change in (lambda i: i["teacher"].update(weights=[0.1, 0.5, 0.4]),
                 lambda i: i.update(seed=1), lambda i: i.update(negatives=10),
                 lambda i: i.update(queries=2),
                 lambda i: i["teacher"]["fusion"][1].update(recipe_sha256="r2"),
                 lambda i: i["teacher"]["fusion"][2].update(params_sha256="p3"),  # no recipe
                 lambda i: i["teacher"]["fusion"][0].update(k1=1.2)):
    changed = json.loads(json.dumps(info))
    change(changed)
    assert teacher_data.teacher_recipe_sha256(changed) != h
  single = {"teacher": info["teacher"]["fusion"][1], **{k: v for k, v in info.items()
                                                        if k != "teacher"}}
  assert teacher_data.teacher_recipe_sha256(single) != h
