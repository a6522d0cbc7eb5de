"""#67 item 1 for the families nothing ships: a tiny checkpoint of each (the classifier, the T5 dual
encoder, RankT5 Encoder-Decoder and Encoder-only) is warmed up with `t5rank serve`'s defaults
(--max-texts 1000, --max-batch-pairs 1024) in one child process: each within 60 s, the child's peak
under 4 GB. The shipped families are tests/test_serve_guard.py's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import jax
import numpy as np

from t5rank.testing import micro_config, random_params

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WARM_UP = """
import sys, time
import t5rank
from t5rank.serving.warmup import warm_up
for path in sys.argv[1:]:
    ranker = t5rank.load(path)
    started = time.perf_counter()
    report = warm_up(ranker, 1024)
    print(ranker.family, time.perf_counter() - started, len(report["shapes"]))
# VmHWM: this program's peak; ru_maxrss would keep the forking pytest worker's across exec
print("peak", next(int(line.split()[1]) for line in open("/proc/self/status")
                   if line.startswith("VmHWM:")))
"""


def tiny_classifier(path: str) -> str:
  from t5rank.checkpoints import native
  from t5rank.models import classifier

  vocabulary = "insuranceqa_en_8k.model"  # the shipped monoT5's
  os.makedirs(path)
  shutil.copyfile(os.path.join(ROOT, "t5rank", "shipped", "monot5", vocabulary),
                  os.path.join(path, vocabulary))
  config = classifier.ClassifierConfig(t5=micro_config(vocab_size=8000))
  params = jax.tree.map(np.asarray, classifier.init_params(config, jax.random.PRNGKey(0)))
  native.save_checkpoint(path, params, config, {
      "model": "classifier", "feature_lengths": {"inputs": 64}, "vocabulary": vocabulary,
      "vocabulary_extra_ids": 0})
  return path


def tiny_t5_dual_encoder(path: str) -> str:
  from t5rank.models.dual_encoder import t5_dual_encoder_config
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.training.dual import T5DualEncoder
  from t5rank.training.trainer import Init

  save_checkpoint(path + "-t5", random_params(micro_config(), std=0.2), micro_config())
  config = t5_dual_encoder_config(path + "-t5", max_query_length=8, max_document_length=32)
  trainable = T5DualEncoder(config)
  trainable.export(path, jax.tree.map(np.asarray, trainable.init_params(
      jax.random.PRNGKey(0), Init(checkpoint=path + "-t5"))), {"step": 0})
  return path


def tiny_rankt5(path: str) -> str:
  from t5rank.models.t5_weights import save_checkpoint

  save_checkpoint(path, random_params(micro_config(), seed=5), micro_config(),
                  {"model": "rankt5", "feature_lengths": {"inputs": 128}})
  return path


def tiny_rankt5_encoder(path: str) -> str:
  from t5rank.checkpoints import native
  from t5rank.models import classifier, rankt5_encoder

  t5_config = micro_config()
  params = {"t5": classifier.encoder_params(random_params(t5_config, seed=7)),
            "head": {"kernel": np.full((32, 1), 0.1, np.float32),
                     "bias": np.zeros(1, np.float32)}}
  native.save_checkpoint(path, params, rankt5_encoder.RankT5EncoderConfig(t5=t5_config),
                         extra_metadata={"model": "rankt5_encoder",
                                         "feature_lengths": {"inputs": 128}})
  return path


def test_the_families_nothing_ships_warm_up_within_60_s_and_4_gb(tmp_path):
  paths = [make(str(tmp_path / make.__name__)) for make in (
      tiny_classifier, tiny_t5_dual_encoder, tiny_rankt5, tiny_rankt5_encoder)]
  result = subprocess.run([sys.executable, "-c", WARM_UP, *paths], capture_output=True,
                          text=True, timeout=900,
                          env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT})
  assert result.returncode == 0, result.stderr[-2000:]
  lines = dict(line.split(" ", 1) for line in result.stdout.strip().splitlines())
  assert set(lines) == {"classifier", "t5_dual_encoder", "rankt5", "rankt5_encoder", "peak"}
  for family, line in lines.items():
    if family != "peak":
      seconds, shapes = line.split()
      assert float(seconds) < 60 and int(shapes) > 0, (family, seconds, shapes)
  assert int(lines["peak"]) < 4 << 20  # kB


def test_after_warm_up_a_dual_encoder_request_compiles_nothing(tmp_path, caplog):
  """The dual encoder computes in `shard_state` (each side's distinct texts, then the cosines):
  warm-up probes those programs too, so a request of texts of every length it takes (and fewer
  texts than the probe's most) compiles nothing."""
  import logging

  import t5rank
  from t5rank.serving.warmup import warm_up

  ranker = t5rank.load(tiny_t5_dual_encoder(str(tmp_path / "de")))
  report = warm_up(ranker, 64)
  kinds = {shape[0] for shape in report["shapes"]}
  assert kinds == {"query", "document", "cosines"}, report["shapes"]
  texts = [" ".join(["policy"] * n) for n in (1, 3, 9, 17, 30, 64, 200)]
  jax.config.update("jax_log_compiles", True)
  try:
    with caplog.at_level(logging.DEBUG):
      ranker.rank("what does a term life insurance policy cover", texts)
    compiled = [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
  finally:
    jax.config.update("jax_log_compiles", False)
  assert compiled == [], compiled[:3]
