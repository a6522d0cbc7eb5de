"""The trainer: loss on packed rows, the real loop, resume after SIGKILL, the NaN stop, the gin files.

All runs use a tiny T5 (vocab 128, d_model 32) on the synthetic task of `train_fixtures`.
"""

import glob
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import train_fixtures as fx
from t5rank.training import seq2seq
from t5rank.training import trainer as train_lib
from t5rank.models.config import get_config
from t5rank.models.network import init_params

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LENGTHS = {"inputs": 16, "targets": 2}
CONFIG = get_config("tiny", **fx.TINY_OVERRIDES)


def read_scalars(logdir: str, tag: str, only: str = "") -> dict[int, float]:
  """{step: value} of one scalar from the TensorBoard event files under `logdir` (or one file)."""
  import tensorflow as tf
  values = {}
  for path in [only] if only else sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == tag:
          values[event.step] = float(tf.make_ndarray(value.tensor))
  return values


GROUPS = {"init": (train_lib.Init, {"init_checkpoint": "checkpoint", "term_matching_heads": None,
                                     "term_matching_scale": None}),
          "optimization": (train_lib.Optimization, {"learning_rate": None, "optimizer": None,
                                                    "dropout_rate": None, "z_loss": None}),
          "loop": (train_lib.Loop, {"checkpoint_every": None, "keep_checkpoints": None,
                                    "log_every": None, "eval_every": None, "eval_fn": None})}


def run_kwargs(model_dir: str, **overrides) -> dict:
  """`train`'s keyword arguments for the synthetic task; flat overrides (`checkpoint_every=4`,
  `init_checkpoint=...`) go into the Init, Optimization and Loop groups."""
  flat = dict(dropout_rate=0.0, checkpoint_every=3, log_every=1)
  flat.update({k: v for k, v in overrides.items()
               if any(k in fields for _, fields in GROUPS.values())})
  kwargs = dict(model_config=CONFIG, task_name="synthetic", feature_lengths=LENGTHS, train_steps=6,
                batch_size=4, model_dir=model_dir, seed=1, dataset_fn=fx.synthetic_dataset)
  for group, (cls, fields) in GROUPS.items():
    kwargs[group] = cls(**{(name or key): flat[key] for key, name in fields.items() if key in flat})
  kwargs.update({k: v for k, v in overrides.items() if k not in flat})
  return kwargs


def test_packed_rows_give_the_loss_of_the_same_examples_unpacked():
  examples = fx.make_examples(np.random.default_rng(0), 6, max_length=7)
  lengths = {"inputs": 24, "targets": 6}
  unpacked = fx.pad_batch(examples, {"inputs": 8, "targets": 2})
  packed = fx.pack_batch(examples, lengths, rows=2)
  assert packed["decoder_segment_ids"].max() == 3  # three examples in each row
  params = jax.jit(init_params, static_argnums=0)(CONFIG, jax.random.PRNGKey(0))
  loss = jax.jit(lambda batch: seq2seq.loss_and_metrics(
      params, batch, config=CONFIG, dropout_rng=None)[1])
  a, b = loss(unpacked), loss(packed)
  np.testing.assert_allclose(float(a["loss"]), float(b["loss"]), rtol=1e-5)
  np.testing.assert_allclose(float(a["accuracy"]), float(b["accuracy"]))
  assert seq2seq.batch_counts(unpacked) == seq2seq.batch_counts(packed)


def test_real_loop_trains_checkpoints_and_logs(tmp_path):
  model_dir = str(tmp_path / "run")
  evaluated = []

  def eval_fn(params, config):
    evaluated.append(config)
    return {"mrr@10": 0.25 * len(evaluated)}

  metrics = train_lib.train(**run_kwargs(model_dir, train_steps=8, checkpoint_every=4,
                                         keep_checkpoints=1, learning_rate=1e-2, eval_every=5,
                                         eval_fn=eval_fn))
  losses = read_scalars(os.path.join(model_dir, "train"), "loss")
  assert sorted(losses) == list(range(1, 9))
  assert losses[8] < losses[1]  # it learns something in 8 steps
  assert metrics["loss"] == pytest.approx(losses[8], rel=1e-6)
  assert metrics["examples_per_second"] > 0 and metrics["tokens_per_second"] > 0
  assert read_scalars(os.path.join(model_dir, "train"), "learning_rate")[8] == pytest.approx(1e-2)
  assert sorted(os.listdir(os.path.join(model_dir, "checkpoints"))) == ["8"]  # keep_checkpoints=1
  with open(os.path.join(model_dir, "config.json")) as f:
    assert type(CONFIG).from_json(f.read()) == CONFIG.replace(dropout_rate=0.0)
  assert read_scalars(os.path.join(model_dir, "train"), "eval/mrr@10") == {5: 0.25, 8: 0.5}
  from t5rank.models.t5_weights import load_checkpoint
  config, params = load_checkpoint(os.path.join(model_dir, "final"))
  assert config == CONFIG.replace(dropout_rate=0.0)
  assert params["decoder"]["decoder_norm"]["scale"].shape == (32,)


def test_term_matching_heads_start_from_the_matching_init(tmp_path):
  model_dir = str(tmp_path / "run")
  train_lib.train(**run_kwargs(model_dir, train_steps=1, learning_rate=0.0,
                               term_matching_heads=2))
  from t5rank.models.network import term_matching_init
  from t5rank.models.t5_weights import load_checkpoint
  _, params = load_checkpoint(os.path.join(model_dir, "final"))
  rng = jax.random.PRNGKey(1)  # run_kwargs' seed
  expected = term_matching_init(init_params(CONFIG, rng), CONFIG, jax.random.fold_in(rng, 1),
                                num_heads=2)
  diffs = jax.tree_util.tree_map(lambda a, b: float(np.abs(np.asarray(a) - np.asarray(b)).max()),
                                 params, expected)
  assert max(jax.tree_util.tree_leaves(diffs)) < 1e-6  # learning rate 0: the init itself
  with pytest.raises(ValueError, match="term_matching_heads"):
    train_lib.train(**run_kwargs(str(tmp_path / "other"), init_checkpoint=os.path.join(model_dir, "final"),
                                 term_matching_heads=2))


IQA_8K_TASK = "insuranceqa_en_8k_monot5_true_false"


def test_the_final_model_carries_the_task_vocabulary(tmp_path):
  """A task on the InsuranceQA 8k vocabulary, trained for 2 steps on its real batches and evaluated
  with the same vocabulary: final/ holds the file, and the scorer picks it with no flag."""
  import t5rank.tasks  # noqa: F401
  from t5rank.checkpoints import native
  from t5rank.training.rerank_eval import RerankEval
  from t5rank.models.loading import load_reranker
  from t5rank.models.vocab import load_vocabulary

  vocab = load_vocabulary("insuranceqa_en_8k")
  evaluation = RerankEval(num_queries=1, max_length=32, vocabulary="insuranceqa_en_8k")
  model_dir = str(tmp_path / "run")
  train_lib.train(**run_kwargs(model_dir, model_config=CONFIG.replace(vocab_size=8000),
                               task_name=IQA_8K_TASK, dataset_fn=None, train_steps=2,
                               feature_lengths={"inputs": 32, "targets": 2}, eval_every=2,
                               eval_fn=evaluation))
  assert 0 <= read_scalars(os.path.join(model_dir, "train"), "eval/mrr@10")[2] <= 1
  final = os.path.join(model_dir, "final")
  with open(os.path.join(final, "insuranceqa_en_8k.model"), "rb") as f:
    assert f.read() == vocab.model_proto
  metadata = native.read_metadata(final)
  assert metadata["vocabulary"] == "insuranceqa_en_8k.model"
  assert metadata["vocabulary_extra_ids"] == 0
  assert metadata["target_words"] == "true_false" and metadata.get("model", "monot5") == "monot5"
  reranker, _ = load_reranker(final)
  assert reranker.vocab.path == os.path.join(final, "insuranceqa_en_8k.model")
  assert (reranker.vocab.sha256, reranker.vocab.vocab_size) == (vocab.sha256, 8000)
  assert reranker.config.vocab_size == 8000 and reranker.max_length == 32
  assert reranker.target_ids == (961, 4396)  # ▁true, ▁false


def test_a_vocabulary_the_model_or_the_evaluation_does_not_match_is_refused(tmp_path):
  import t5rank.tasks  # noqa: F401
  from t5rank.training.rerank_eval import RerankEval

  model_dir = tmp_path / "run"
  with pytest.raises(ValueError, match=r"insuranceqa_en_8k.model: 8000 pieces \+ 0 extra ids = "
                     r"8000 ids, more than the model's vocab_size 128; set it to at least 8000"):
    train_lib.train(**run_kwargs(str(model_dir), task_name=IQA_8K_TASK))
  with pytest.raises(ValueError, match="32000 pieces \\+ 100 extra ids = 32100 ids"):
    train_lib.train(**run_kwargs(str(model_dir), task_name="insuranceqa_en_monot5_true_false"))
  config = CONFIG.replace(vocab_size=8000)
  with pytest.raises(ValueError, match="rerank_eval.RerankEval.vocabulary = 'insuranceqa_en_8k'"):
    train_lib.train(**run_kwargs(str(model_dir), model_config=config, task_name=IQA_8K_TASK,
                                 eval_every=1, eval_fn=RerankEval(num_queries=1, max_length=32)))
  with pytest.raises(ValueError, match="rerank_eval.RerankEval.targets = 'true_false'"):
    train_lib.train(**run_kwargs(str(model_dir), model_config=config, task_name=IQA_8K_TASK,
                                 eval_every=1, eval_fn=RerankEval(num_queries=1, max_length=32,
                                                                  targets="hot_cold",
                                                                  vocabulary="insuranceqa_en_8k")))
  plain_eval = RerankEval(num_queries=1, max_length=32, vocabulary="insuranceqa_en_8k")
  with pytest.raises(ValueError, match="rerank_eval.RerankEval.bm25_in_input = True"):
    train_lib.train(**run_kwargs(str(model_dir), model_config=config, eval_every=1,
                                 task_name="insuranceqa_en_8k_pseudo_bm25_monot5_true_false",
                                 eval_fn=plain_eval))
  assert not model_dir.exists()  # refused before anything was written


# Dropout on: the resumed run must also draw the same dropout masks.
RUN_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import test_train
from t5rank.training import trainer as train
train.train(**test_train.run_kwargs({model_dir!r}, dropout_rate=0.1))
"""


def _start(model_dir: str, cache_dir: str, hang_at_step: int = 0) -> subprocess.Popen:
  """The same training command in a fresh process; the three runs share one compilation cache."""
  env = dict(os.environ, T5RANK_TEST_HANG_AT_STEP=str(hang_at_step), JAX_PLATFORMS="cpu",
             TF_CPP_MIN_LOG_LEVEL="3", JAX_COMPILATION_CACHE_DIR=cache_dir,
             JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
  script = RUN_SCRIPT.format(tests=os.path.join(REPO, "tests"), model_dir=model_dir)
  return subprocess.Popen([sys.executable, "-c", script], env=env, cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_sigkill_then_same_command_resumes_with_same_losses(tmp_path):
  cache = str(tmp_path / "jax_cache")
  straight = str(tmp_path / "straight")
  out, _ = _start(straight, cache).communicate(timeout=300)
  expected = read_scalars(os.path.join(straight, "train"), "loss")
  assert sorted(expected) == [1, 2, 3, 4, 5, 6], out

  killed = str(tmp_path / "killed")
  proc = _start(killed, cache, hang_at_step=5)  # blocks for the data of step 5, after checkpoint 3
  committed = os.path.join(killed, "checkpoints", "3", "_CHECKPOINT_METADATA")
  deadline = time.time() + 240
  while not os.path.exists(committed) and proc.poll() is None and time.time() < deadline:
    time.sleep(0.5)
  assert os.path.exists(committed), proc.communicate()[0] if proc.poll() is not None else "timeout"
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert sorted(os.listdir(os.path.join(killed, "checkpoints"))) == ["3"]

  out, _ = _start(killed, cache).communicate(timeout=300)
  assert f"resumed from {killed}/checkpoints/3" in out, out
  newest = max(glob.glob(os.path.join(killed, "train", "events.out.tfevents.*")),
               key=os.path.getmtime)
  resumed = read_scalars(os.path.dirname(newest), "loss", only=newest)
  assert sorted(resumed) == [4, 5, 6]
  np.testing.assert_allclose([resumed[s] for s in (4, 5, 6)], [expected[s] for s in (4, 5, 6)],
                             rtol=1e-5)


def test_nan_stops_with_an_error_and_keeps_the_last_good_checkpoint(tmp_path):
  model_dir = str(tmp_path / "nan")
  poisoned = lambda step: jnp.where(step < 3, 1e-3, jnp.nan)  # step 4's update is NaN
  with pytest.raises(FloatingPointError, match="last good checkpoint is step 2"):
    train_lib.train(**run_kwargs(model_dir, learning_rate=poisoned, checkpoint_every=2))
  assert sorted(os.listdir(os.path.join(model_dir, "checkpoints"))) == ["2"]
  import orbax.checkpoint as ocp
  restored = ocp.StandardCheckpointer().restore(os.path.join(model_dir, "checkpoints", "2", "state"))
  assert all(np.isfinite(x).all() for x in jax.tree.leaves(restored["params"]))
  assert int(restored["step"]) == 2


def test_the_host_syncs_only_on_log_checkpoint_and_eval_steps(tmp_path, monkeypatch):
  """The loop leaves metrics on the device between sync steps (the first step of the process, log,
  checkpoint and evaluation steps), and a NaN is still caught, at the next sync, before a save."""
  synced = []
  sync = train_lib._sync
  monkeypatch.setattr(train_lib, "_sync", lambda pending, progress, step, manager: (
      synced.append((step, len(pending))), sync(pending, progress, step, manager)))
  train_lib.train(**run_kwargs(str(tmp_path / "a"), train_steps=12, log_every=5,
                               checkpoint_every=8, eval_every=6, eval_fn=lambda p, c: {"x": 1.0}))
  # step 1 (after compilation), 5 (log), 6 (eval), 8 (checkpoint), 10 (log), 12 (the end)
  assert synced == [(1, 1), (5, 4), (6, 1), (8, 2), (10, 2), (12, 2)]

  poisoned = lambda step: jnp.where(step < 5, 1e-3, jnp.nan)  # step 6's update is NaN
  with pytest.raises(FloatingPointError, match=r"step 6: loss .* stopped at step 8\. The last "
                     r"good checkpoint is step 4"):
    train_lib.train(**run_kwargs(str(tmp_path / "b"), learning_rate=poisoned, log_every=8,
                                 checkpoint_every=4, train_steps=12))
  assert sorted(os.listdir(tmp_path / "b" / "checkpoints")) == ["4"]


def test_every_experiment_gin_binds_a_complete_run():
  import gin
  from t5rank.training import gin_config
  experiments = sorted(glob.glob(os.path.join(REPO, "gin", "experiments", "*.gin")))
  assert len(experiments) >= 10
  try:
    for path in experiments:
      gin.clear_config()
      flags = ["--gin.MODEL_DIR=/tmp/x"]
      if path.endswith("monot5_base_msmarco_targets.gin"):  # the target words: one macro
        flags.append("--gin.MIXTURE_OR_TASK_NAME=msmarco_passage_monot5_hot_cold")
      if os.path.basename(path).startswith("duot5_"):  # duoT5 starts from a monoT5 you give
        flags.append("--gin.INIT_CHECKPOINT=/tmp/monot5/final")
      if "_distill_" in os.path.basename(path):  # the teacher's scores you give
        flags.append("--gin.TEACHER_SCORES=/tmp/teacher")
      if path.endswith("rankt5_tiny_cpu.gin"):  # your own files, as lists
        flags += [f"--gin.{m}=/tmp/{m.lower()}" for m in (
            "TRAIN_QUERIES", "TRAIN_QRELS", "TRAIN_RUN", "CORPUS")]
      if path.endswith("monot5_own_data.gin"):  # your own files
        flags += [f"--gin.{m}=/tmp/{m.lower()}" for m in (
            "TRAIN_QUERIES", "TRAIN_QRELS", "TRAIN_RUN", "VALID_QUERIES", "VALID_QRELS",
            "VALID_RUN", "CORPUS")]
      gin_config.parse_gin([path], gin_config.gin_bindings(flags))
      assert gin.query_parameter("%MODEL_DIR") == "/tmp/x"
      for macro in ("MIXTURE_OR_TASK_NAME", "TRAIN_STEPS", "BATCH_SIZE", "INIT_CHECKPOINT"):
        gin.query_parameter(f"%{macro}")  # raises if missing
    gin.clear_config()
    gin_config.parse_gin([os.path.join(REPO, "gin", "experiments", "monot5_3B_msmarco.gin")],
                        gin_config.gin_bindings(["--gin.MODEL_DIR=/tmp/x", "--gin.TRAIN_STEPS=7"]))
    assert gin.query_parameter("%TRAIN_STEPS") == 7
    assert tuple(gin.query_parameter("%MESH_SHAPE"))[1] > 1  # 3B needs model parallelism
  finally:
    gin.clear_config()


def test_gin_flags_quote_bare_words():
  from t5rank.training.gin_config import gin_bindings
  assert gin_bindings(["--gin.MODEL_DIR=/tmp/a b", "--gin.TRAIN_STEPS=10",
                       "--gin.TASK_FEATURE_LENGTHS={'inputs': 64, 'targets': 2}",
                       "--gin.INIT_CHECKPOINT=None"]) == [
      "MODEL_DIR = '/tmp/a b'", "TRAIN_STEPS = 10",
      "TASK_FEATURE_LENGTHS = {'inputs': 64, 'targets': 2}", "INIT_CHECKPOINT = None"]
  with pytest.raises(SystemExit, match="--gin.NAME=VALUE"):
    gin_bindings(["--steps=3"])


def test_a_run_resumed_with_more_steps_exports_the_new_final(tmp_path):
  from t5rank.checkpoints import native

  model_dir = str(tmp_path / "run")
  train_lib.train(**run_kwargs(model_dir, train_steps=3))
  assert native.read_metadata(os.path.join(model_dir, "final"))["step"] == 3
  train_lib.train(**run_kwargs(model_dir, train_steps=6))
  assert native.read_metadata(os.path.join(model_dir, "final"))["step"] == 6
  assert native.read_metadata(os.path.join(model_dir, "final.step3"))["step"] == 3


def test_pretraining_then_fine_tuning_from_it_and_a_vocabulary_mismatch_refused(tmp_path):
  """Span corruption trains through the same trainer (its final/ ships the 8k vocabulary with 100
  sentinels); a monoT5 task on the same pieces fine-tunes from it; a checkpoint whose vocabulary has
  other pieces is refused before anything is written."""
  import shutil

  import t5rank.tasks  # noqa: F401
  from t5rank.checkpoints import native
  from t5rank.data.span_corruption import TextSource, register_span_corruption_task
  from t5rank.models.vocab import DEFAULT_SPM_PATH
  import seqio

  name = "pretrain_trainer_test"
  if name not in seqio.TaskRegistry.names():
    docs = ["A deductible is what you pay first.", "Term life insurance lasts a set number of years.",
            "Whole life insurance builds cash value."] * 10
    register_span_corruption_task(name, TextSource(lambda split: docs, ["train"]),
                                  "insuranceqa_en_8k_sentinels", shuffle_buffer_size=8)
  config = CONFIG.replace(vocab_size=8100)
  pretrained = str(tmp_path / "pretrain")
  metrics = train_lib.train(**run_kwargs(
      pretrained, model_config=config, task_name=name, dataset_fn=None, train_steps=3, pack=True,
      feature_lengths={"inputs": 32, "targets": 8},
      learning_rate=train_lib.inverse_square_root(warmup_steps=100)))
  assert np.isfinite(metrics["loss"]) and 0 <= metrics["token_accuracy"] <= 1
  final = os.path.join(pretrained, "final")
  metadata = native.read_metadata(final)
  assert (metadata["vocabulary"], metadata["vocabulary_extra_ids"]) == ("insuranceqa_en_8k.model", 100)
  assert "target_words" not in metadata
  tuned = str(tmp_path / "tuned")
  train_lib.train(**run_kwargs(tuned, model_config=config, task_name=IQA_8K_TASK, dataset_fn=None,
                               train_steps=1, feature_lengths={"inputs": 32, "targets": 2},
                               init_checkpoint=final))
  assert os.path.isdir(os.path.join(tuned, "final"))
  other = str(tmp_path / "other_vocab")
  shutil.copytree(final, other)
  shutil.copyfile(DEFAULT_SPM_PATH, os.path.join(other, "insuranceqa_en_8k.model"))  # T5's pieces
  with pytest.raises(ValueError, match="vocabulary mismatch: init checkpoint .*\\(32000 pieces.* task "
                     f"{IQA_8K_TASK} tokenizes with .*insuranceqa_en_8k.model \\(8000 pieces"):
    train_lib.train(**run_kwargs(str(tmp_path / "refused"), model_config=config,
                                 task_name=IQA_8K_TASK, dataset_fn=None, init_checkpoint=other))
  assert not (tmp_path / "refused").exists()


def test_inverse_square_root_is_t5s_schedule():
  schedule = train_lib.inverse_square_root()
  assert float(schedule(0)) == pytest.approx(0.01)
  assert float(schedule(10_000)) == pytest.approx(0.01)
  assert float(schedule(40_000)) == pytest.approx(0.005)
  assert float(train_lib.inverse_square_root(100, scale=2.0)(400)) == pytest.approx(0.1)
  with pytest.raises(ValueError, match="warmup_steps must be >= 1"):
    train_lib.inverse_square_root(0)


def test_the_encoder_only_classifier_trains_exports_and_scores_as_defined(tmp_path):
  """The "monoBERT" formulation on T5's encoder: trained by the same trainer on a monoT5 task
  (labels from the target word), exported with model `classifier`, loaded by load_reranker, and its
  score is log_softmax(h W + b)[relevant] of the encoder's first position, computed here by hand."""
  import t5rank.tasks  # noqa: F401
  from t5rank.checkpoints import native
  from t5rank.models.classifier import Classifier, ClassifierConfig
  from t5rank.models.network import T5
  from t5rank.models.loading import load_reranker

  t5 = CONFIG.replace(vocab_size=8000)
  config = ClassifierConfig(t5=t5)
  model_dir = str(tmp_path / "classifier")
  metrics = train_lib.train(**run_kwargs(model_dir, model_config=config, task_name=IQA_8K_TASK,
                                         dataset_fn=None, train_steps=2,
                                         feature_lengths={"inputs": 32, "targets": 2}))
  assert np.isfinite(metrics["loss"]) and 0 <= metrics["accuracy"] <= 1
  final = os.path.join(model_dir, "final")
  metadata = native.read_metadata(final)
  assert metadata["model"] == "classifier" and "target_words" not in metadata
  reranker, params = load_reranker(final)
  assert isinstance(reranker, Classifier) and reranker.max_length == 32
  assert set(params) == {"t5", "head"} and "decoder" not in params["t5"]
  ids = np.asarray(reranker.encode(["what is a deductible"], ["the amount you pay first"]),
                   np.int32)
  score, probability = reranker.score_batch(params, (ids,))
  encoded = T5(t5).apply({"params": params["t5"]}, jnp.asarray(ids), method=T5.encode)
  h = np.asarray(encoded[0, 0], np.float64)
  logits = h @ np.asarray(params["head"]["kernel"], np.float64) + np.asarray(params["head"]["bias"])
  expected = logits[1] - np.log(np.exp(logits[0]) + np.exp(logits[1]))
  np.testing.assert_allclose(float(score[0]), expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(float(probability[0]), np.exp(expected), rtol=1e-5)
  with pytest.raises(ValueError, match="no target words"):
    load_reranker(final, options={"targets": "hot_cold"})
  # from a T5 checkpoint: the encoder is the checkpoint's, the head new
  t5_dir = str(tmp_path / "t5")
  train_lib.train(**run_kwargs(t5_dir, model_config=t5, task_name=IQA_8K_TASK, dataset_fn=None,
                               train_steps=1, feature_lengths={"inputs": 32, "targets": 2}))
  from t5rank.training.classifier import ClassifierTrainable
  start = ClassifierTrainable(config).init_params(jax.random.PRNGKey(0),
                                                  train_lib.Init(checkpoint=os.path.join(t5_dir, "final")))
  from t5rank.models.t5_weights import restore_checkpoint
  _, t5_params = restore_checkpoint(os.path.join(t5_dir, "final"))
  np.testing.assert_array_equal(start["t5"]["token_embedder"]["embedding"],
                                t5_params["token_embedder"]["embedding"])
  assert start["head"]["kernel"].shape == (32, 2)
  with pytest.raises(ValueError, match="unpacked"):
    train_lib.train(**run_kwargs(str(tmp_path / "packed"), model_config=config, pack=True,
                                 task_name=IQA_8K_TASK, dataset_fn=None,
                                 feature_lengths={"inputs": 32, "targets": 2}))


def test_the_training_step_runs_where_seqio_and_tensorflow_are_missing():
  """The trainer's step with the monoT5 loss needs no SeqIO (a GPU machine without TensorFlow
  times it: benchmarks/device_speed.py --train); only reading a task imports it."""
  script = """
import sys
class Missing:
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in ("seqio", "tensorflow", "tensorflow_datasets"):
      raise ImportError(name + " is not installed here")
sys.meta_path.insert(0, Missing())
import numpy as np
from t5rank import partitioning
from t5rank.models.config import get_config
from t5rank.testing import random_params
from t5rank.training import trainer
from t5rank.training.seq2seq import Seq2Seq
config = get_config("tiny", num_encoder_layers=1, num_decoder_layers=1)
run = trainer.make_trainer(Seq2Seq(config), partitioning.create_mesh((-1, 1)),
                           optimizer=trainer.adafactor(1e-3),
                           schedule=trainer.learning_rate_fn(1e-3))
state = run.init_fn(random_params(config, std=0.05))
batch = {"encoder_input_tokens": np.array([[5, 6, 1], [7, 1, 0]], np.int32),
         "decoder_input_tokens": np.array([[0, 1176], [0, 6136]], np.int32),
         "decoder_target_tokens": np.array([[1176, 1], [6136, 1]], np.int32),
         "decoder_loss_weights": np.ones((2, 2), np.int32)}
state, metrics = run.step_fn(state, batch)
assert int(state["step"]) == 1 and np.isfinite(float(metrics["loss"]))
print("ok")
"""
  out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, XLA_FLAGS=""))  # one device: 2 rows
  assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
