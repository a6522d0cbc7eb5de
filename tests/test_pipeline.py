"""The InsuranceQA job end to end (`t5rank demo`'s `run_insuranceqa`) on 5 test queries, BM25 top 10,
with a 1+1-layer, d_model 32 model trained for 2 steps on 64-token inputs; then again, reusing it.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from t5rank.pipelines import insuranceqa as pipeline
from t5rank.pipelines import insuranceqa_pools as data
from t5rank.pipelines import training_runs
from t5rank.models.loading import load_reranker
from t5rank.ranking import scorer as scoring
from t5rank.training import gin_config
from t5rank.data.readers import document_text, read_corpus, read_qrels, read_queries, read_run
from t5rank.evaluation.metrics import evaluate

# The experiment gin with the model shrunk, inputs cut short, 2 steps and no evaluation during training.
TINY_RECIPE = [
    "TRAIN_STEPS = 2", "BATCH_SIZE = 4", "CHECKPOINT_EVERY = 2", "LOG_EVERY = 1",
    "TASK_FEATURE_LENGTHS = {'inputs': 64, 'targets': 2}",
    "config.get_config.d_model = 32", "config.get_config.d_ff = 64",
    "config.get_config.num_heads = 2", "config.get_config.d_kv = 16",
    "config.get_config.num_encoder_layers = 1", "config.get_config.num_decoder_layers = 1",
    "trainer.Loop.eval_every = 0", "trainer.Loop.eval_fn = None"]
QUERIES, DEPTH = 5, 10


def check_run_file(path: str, qids: list[str], pool: dict) -> dict:
  """Asserts `path` is a TREC run with DEPTH ranked candidates from the pool of each of `qids`."""
  with open(path) as f:
    lines = [line.split() for line in f]
  assert all(len(fields) == 6 and fields[1] == "Q0" for fields in lines)
  run = read_run(path)
  assert list(run) == qids
  for qid, ranked in run.items():
    assert len(ranked) == DEPTH
    assert {d for d, _ in ranked} <= {d for d, _ in pool[qid]}
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True)
  assert [int(fields[3]) for fields in lines[:DEPTH]] == list(range(1, DEPTH + 1))
  return run


def test_insuranceqa_job_end_to_end_then_reuses_the_model(tmp_path, monkeypatch, capsys):
  workdir = str(tmp_path / "job")
  results = pipeline.run_insuranceqa(workdir=workdir, depth=DEPTH, num_queries=QUERIES,
                                     gin_bindings=TINY_RECIPE, tune_queries=4, progress=False)
  out = capsys.readouterr().out
  for stage in ("export", "bm25", "train", "rerank", "tune", "evaluate"):
    assert f"== {stage}: " in out
  assert "BM25+monoT5" in out and "p-values vs BM25" in out

  qids = list(read_queries(os.path.join(workdir, "data", "queries.tsv")))[:QUERIES]
  pool = read_run(os.path.join(workdir, "data", "pool.run"))
  bm25 = check_run_file(os.path.join(workdir, "bm25.run"), qids, pool)
  monot5 = check_run_file(os.path.join(workdir, "cascade", "01_monot5.run"), qids, pool)
  hybrid = check_run_file(os.path.join(workdir, "hybrid.run"), qids, pool)
  assert all({d for d, _ in bm25[q]} == {d for d, _ in monot5[q]} == {d for d, _ in hybrid[q]}
             for q in qids)  # same candidates
  valid_qids = list(read_queries(os.path.join(workdir, "data_valid", "queries.tsv")))[:4]
  valid_pool = read_run(os.path.join(workdir, "data_valid", "pool.run"))
  check_run_file(os.path.join(workdir, "valid_bm25.run"), valid_qids, valid_pool)
  check_run_file(os.path.join(workdir, "valid_cascade", "01_monot5.run"), valid_qids, valid_pool)

  with open(os.path.join(workdir, "results.json")) as f:
    saved = json.load(f)
  assert saved == results
  assert saved["queries"] == QUERIES and saved["depth"] == DEPTH
  assert saved["model"]["trained_now"] and saved["model"]["step"] == 2
  assert saved["model"]["max_length"] == 64
  assert saved["candidates"] == f"BM25's top {DEPTH}"
  # the default recipe's model reads each candidate's BM25 score, and says so in its checkpoint
  assert saved["model"]["bm25_in_input"] is True
  assert load_reranker(os.path.join(workdir, "model", "final"))[0].bm25_in_input
  runs = saved["evaluation"]["runs"]
  assert [r["name"] for r in runs] == ["BM25", "BM25+monoT5", "BM25+monoT5 hybrid"]
  weight = saved["hybrid"]["weight"]
  assert saved["hybrid"]["validation_MRR"][f"{weight:g}"] == max(
      saved["hybrid"]["validation_MRR"].values())
  assert saved["evaluation"]["comparisons"] == 2
  for r in runs:
    assert set(r["mean"]) == set(data.METRICS)
    assert all(0.0 <= v <= 1.0 for v in r["mean"].values())
  for r in runs[1:]:
    assert set(r["vs_baseline"]) == set(data.METRICS)
    assert 0.0 <= r["vs_baseline"]["MRR"]["p"] <= 1.0
  assert set(saved["timings_s"]) == {"export", "bm25", "train", "rerank", "tune", "evaluate",
                                     "total"}
  # the files it names evaluate to the figures it reports (the qrels of the queries evaluated)
  assert set(read_qrels(saved["files"]["qrels"])) == set(qids)
  for name, r in zip(("bm25", "monot5", "hybrid"), runs):
    figures = evaluate(read_qrels(saved["files"]["qrels"]),
                       {name: read_run(saved["files"][name])}, data.METRICS)
    assert figures["runs"][0]["mean"] == r["mean"], name
  with open(os.path.join(workdir, "results.png"), "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"

  final = os.path.join(workdir, "model", "final")
  stamp = os.path.getmtime(os.path.join(final, "config.json"))

  def no_training(record):
    raise AssertionError("the second run trained again")

  def no_scoring(*args, **kwargs):
    raise AssertionError("the second run scored the same candidates again")

  monkeypatch.setattr(gin_config, "train_configured", no_training)
  monkeypatch.setattr(scoring, "score_candidates", no_scoring)
  again = pipeline.run_insuranceqa(workdir=workdir, depth=DEPTH, num_queries=QUERIES,
                                   gin_bindings=TINY_RECIPE, tune_queries=4, progress=False)
  assert "using the model in" in capsys.readouterr().out
  assert not again["model"]["trained_now"] and "load model" in again["timings_s"]
  assert "reuse run" in again["timings_s"] and "rerank" not in again["timings_s"]
  assert os.path.getmtime(os.path.join(final, "config.json")) == stamp
  assert again["evaluation"]["runs"] == runs  # same model, same candidates, same figures


def test_recipe_hash_follows_the_gin_config_but_not_model_dir():
  base = gin_config.recipe([data.DEFAULT_GIN_FILE], TINY_RECIPE)
  assert gin_config.recipe([data.DEFAULT_GIN_FILE], [*TINY_RECIPE, "MODEL_DIR = '/elsewhere'"]
                         ) == base
  other = gin_config.recipe([data.DEFAULT_GIN_FILE], [*TINY_RECIPE, "TRAIN_STEPS = 3"])
  assert other["sha256"] != base["sha256"] and "TRAIN_STEPS = 3" in other["gin"]


def test_bad_depth_is_refused_before_any_work(tmp_path):
  with pytest.raises(ValueError, match="must be positive"):
    pipeline.run_insuranceqa(workdir=str(tmp_path), depth=0)
  assert os.listdir(tmp_path) == []


def test_demo_command_refuses_flags_that_are_not_gin_bindings(capsys):
  from t5rank.cli import main
  with pytest.raises(SystemExit, match="unrecognized argument '--steps=3'; expected --gin.NAME=VALUE"):
    main(["demo", "--output", "/nonexistent", "--steps=3"])


def test_prepare_model_reuses_resumes_or_moves_aside_by_recipe(tmp_path, monkeypatch):
  model_dir = str(tmp_path / "model")
  calls = []

  def fake_training(record):  # what the trainer leaves: the recipe, a checkpoint in final/
    import gin
    final = os.path.join(gin.query_parameter("%MODEL_DIR"), "final")
    calls.append(gin.query_parameter("%TRAIN_STEPS"))
    os.makedirs(os.path.dirname(final), exist_ok=True)
    for name, text in record.items():
      with open(os.path.join(os.path.dirname(final), name), "w") as f:
        f.write(text)
    if not os.path.exists(final):
      os.makedirs(os.path.join(final, "params"))
      with open(os.path.join(final, "config.json"), "w") as f:
        f.write("{}")

  monkeypatch.setattr(gin_config, "train_configured", fake_training)
  gin_files = [data.DEFAULT_GIN_FILE]
  assert training_runs.prepare_model(model_dir, gin_files, TINY_RECIPE) == (
      os.path.join(model_dir, "final"), True)
  assert training_runs.prepare_model(model_dir, gin_files, TINY_RECIPE)[1] is False  # same recipe
  assert calls == [2]
  os.remove(os.path.join(model_dir, "final", "config.json"))  # as if training was interrupted
  assert training_runs.prepare_model(model_dir, gin_files, TINY_RECIPE)[1] is True  # resumed in place
  assert calls == [2, 2] and not os.path.exists(model_dir + ".previous")
  assert training_runs.prepare_model(model_dir, gin_files, [*TINY_RECIPE, "TRAIN_STEPS = 3"])[1] is True
  assert calls == [2, 2, 3] and os.path.exists(os.path.join(model_dir + ".previous", "final"))
  assert training_runs.prepare_model(model_dir, gin_files, [*TINY_RECIPE, "TRAIN_STEPS = 3"],
                                retrain=True)[1] is True
  assert calls == [2, 2, 3, 3]
  with open(os.path.join(model_dir + ".previous", training_runs.RECIPE_FILE)) as f:
    assert "TRAIN_STEPS = 3" in json.load(f)["gin"]  # the model it replaced


# The cross-lingual job's two stages shrunk alike: the fine-tuning starts from the pre-trained weights.
SHAPE = [b for b in TINY_RECIPE if b.startswith("config.")]
TINY_PRETRAIN = [*SHAPE, "TRAIN_STEPS = 2", "BATCH_SIZE = 4", "CHECKPOINT_EVERY = 2",
                 "LOG_EVERY = 1", "WARMUP_STEPS = 1",
                 "TASK_FEATURE_LENGTHS = {'inputs': 64, 'targets': 16}"]


def tiny_words(tmp_path) -> str:
  """A word list of a few English words and Chinese characters, 8-d random vectors."""
  from t5rank.models.words import WordVocabulary, save_embeddings
  vocabulary = WordVocabulary.build(["life insurance pays", "car insurance", "人寿保险", "汽车保险"],
                                    min_count=1)
  vectors = np.random.default_rng(0).normal(size=(vocabulary.size, 8)).astype(np.float32)
  path = str(tmp_path / "words")
  save_embeddings(path, vocabulary, vectors, {"source": "test"})
  return path


def test_cross_lingual_job_pretrains_fine_tunes_and_breaks_down_by_language(tmp_path, capsys):
  from t5rank.checkpoints import native
  from t5rank.data.xpr import answer_of
  from t5rank.retrieval.encoders import load_encoder

  workdir = str(tmp_path / "xpr")
  # the dual encoder's two stages: 2 steps of 16 pairs each, evaluated (best/) at step 2
  tiny_dense = [f"WORD_EMBEDDINGS = {tiny_words(tmp_path)!r}", "TRAIN_STEPS = 2",
                "BATCH_SIZE = 16", "EVAL_EVERY = 2", "CHECKPOINT_EVERY = 2", "LOG_EVERY = 1",
                "dual.InBatchEval.batch_size = 16", "dual.InBatchEval.max_batches = 1"]
  results = pipeline.run_insuranceqa(workdir=workdir, depth=DEPTH, num_queries=4,
                                     gin_bindings=TINY_RECIPE, pretrain_bindings=TINY_PRETRAIN,
                                     dense_bindings=tiny_dense,
                                     tune_queries=3, progress=False, job=data.CROSS_LINGUAL)
  out = capsys.readouterr().out
  for stage in ("export", "bm25", "pretrain", "train", "rerank", "tune", "dense pretrain",
                "dense train", "dense rank", "evaluate"):
    assert f"== {stage}: " in out
  assert "share of the query's language" in out
  assert results["bm25"]["language"] == "zh"
  pretrained = results["model"]["pretrained"]
  assert pretrained["trained_now"] and pretrained["step"] == 2
  assert pretrained["checkpoint"] == os.path.join(workdir, "pretrain", "final")
  # the fine-tuning read the pre-trained checkpoint and the bilingual vocabulary, and says so
  with open(os.path.join(workdir, "model", training_runs.RECIPE_FILE)) as f:
    gin_text = json.load(f)["gin"]
  assert "INIT_CHECKPOINT" in gin_text and pretrained["checkpoint"] in gin_text
  metadata = native.read_metadata(os.path.join(workdir, "model", "final"))
  assert metadata["vocabulary"].startswith("insuranceqa_enzh_16k")
  assert results["model"]["target_words"] == "yes_no"
  # mixed-language candidate lists, ranked by the model as they are
  qids = list(read_queries(os.path.join(workdir, "data", "queries.tsv")))[:4]
  pool = read_run(os.path.join(workdir, "data", "pool.run"))
  monot5 = check_run_file(os.path.join(workdir, "cascade", "01_monot5.run"), qids, pool)
  assert {answer_of(d)[1] for q in qids for d, _ in monot5[q]} == {"en", "zh"}
  systems = [*pipeline.SYSTEMS, pipeline.DENSE_SYSTEM]
  assert [r["name"] for r in results["evaluation"]["runs"]] == systems
  assert set(results["evaluation"]["runs"][0]["mean"]) == set(data.XPR_METRICS)
  # the dual encoder: XPI's pairs first, the mixed pairs from that stage's best checkpoint, and its
  # run is the BM25 candidates ordered by the best checkpoint's cosines
  dense = results["dual_encoder"]
  assert dense["checkpoint"] == os.path.join(workdir, "dense", "best") and dense["step"] == 2
  assert dense["first_stage"]["checkpoint"] == os.path.join(workdir, "dense_pretrain", "best")
  with open(os.path.join(workdir, "dense_pretrain", training_runs.RECIPE_FILE)) as f:
    assert "'xpi_enzh'" in json.load(f)["gin"]
  with open(os.path.join(workdir, "dense", training_runs.RECIPE_FILE)) as f:
    gin_text = json.load(f)["gin"]
  assert "'insuranceqa_enzh_mixed'" in gin_text and dense["first_stage"]["checkpoint"] in gin_text
  dense_run = check_run_file(os.path.join(workdir, "dense.run"), qids, pool)
  encoder = load_encoder(dense["checkpoint"])
  queries = read_queries(os.path.join(workdir, "data", "queries.tsv"))
  corpus = read_corpus(os.path.join(workdir, "data", "corpus.jsonl"))
  spread = 0.0
  for q in qids:
    docs = [d for d, _ in dense_run[q]]
    expected = encoder.encode([document_text(corpus[d]) for d in docs], "document") @ (
        encoder.encode([queries[q]], "query")[0])
    np.testing.assert_allclose([s for _, s in dense_run[q]], expected, atol=1e-6)
    spread = max(spread, float(np.ptp(expected)))
  assert spread > 0.1  # the cosines differ: the tiny word list knows words of these texts
  for name in systems:
    rows = results["languages"][name]["breakdown"]
    assert sum(r["queries"] for r in rows if r["relevant"] == "all") == 4
    assert 0.0 <= results["languages"][name]["preference"]["top_k_nonrelevant"] <= 1.0
  with open(os.path.join(workdir, "data", "xpr.json")) as f:
    assert json.load(f)["seed"] == data.XPR_SEED
