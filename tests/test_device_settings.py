"""What a device computes and what it compiles: the precision of matrix products reaches the
compiled scoring step, JAX's persistent compilation cache serves a second run, and a CPU's batch
holds more tokens for a narrower T5 (the same scores).

On a GPU, JAX computes float32 matrix products in TF32 unless told otherwise; `--precision float32`
(the default for float32 weights) tells it. A CPU computes float32 products whatever the setting,
so these tests check the setting in the compiled program, not the numbers.
"""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jaxlib
import numpy as np
import pytest

from t5rank.models.dual_encoder import T5DualEncoderConfig, T5DualEncoderReranker
from t5rank.models.monot5 import MonoT5, score_step
from t5rank.models.t5_weights import save_checkpoint
from t5rank.models.vocab import load_vocabulary
from t5rank.ranking import scorer
from t5rank.ranking.devices import default_batch_tokens, scoring_mesh
from t5rank.testing import micro_config, random_params

CONFIG = micro_config()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("precision, operand", [("float32", "HIGHEST"),
                                                ("tensorfloat32", "HIGH"),
                                                ("bfloat16", "DEFAULT")])
def test_the_precision_reaches_every_matrix_product_of_the_compiled_step(precision, operand):
  params = random_params(CONFIG, std=0.2)
  tokens = np.ones((2, 16), np.int32)
  step = jax.jit(score_step, static_argnames=("config", "target_ids"))
  with jax.default_matmul_precision(precision):
    text = step.lower(params, tokens, config=CONFIG, target_ids=(1176, 6136)).as_text()
  dots = [line for line in text.splitlines() if "dot_general" in line]
  assert len(dots) >= 8  # attention and feed-forward products of encoder and decoder, the head
  assert all(f"precision = [{operand}, {operand}]" in line for line in dots), dots[0]


def test_the_scorer_computes_under_the_precision_it_is_given(monkeypatch):
  reranker = MonoT5(CONFIG, load_vocabulary(), (1176, 6136), max_length=32)
  seen = []
  score_batch = MonoT5.score_batch

  def recording(self, state, arrays):
    seen.append(jax.config.jax_default_matmul_precision)
    return score_batch(self, state, arrays)

  monkeypatch.setattr(MonoT5, "score_batch", recording)
  params = random_params(CONFIG, std=0.2)
  for precision in ("float32", "tensorfloat32"):
    scorer.score_pairs(reranker, params, ["car"], ["car policy"], precision=precision)
    assert seen[-1] == precision
  with pytest.raises(ValueError, match="unknown precision 'tf32'"):
    scorer.ScoringOptions(precision="tf32")


def test_a_second_score_of_the_same_model_compiles_nothing(tmp_path):
  save_checkpoint(str(tmp_path / "ckpt"), random_params(CONFIG, std=0.2), CONFIG)
  (tmp_path / "q.tsv").write_text("q1\tcar insurance\nq2\tlife cover\n")
  (tmp_path / "c.tsv").write_text("".join(f"d{i}\tpolicy number {i} {'term ' * i}\n"
                                          for i in range(6)))
  (tmp_path / "run").write_text("".join(f"q{q} Q0 d{i} {i + 1} 0 x\n" for q in (1, 2)
                                        for i in range(6)))
  # counts the programs compiled anew and read from the cache (JAX's monitoring events), in a
  # fresh process each time
  code = ("import sys, jax.monitoring as m, collections\n"
          "n = collections.Counter()\n"
          "m.register_event_listener(lambda e, **k: n.update([e]))\n"
          "from t5rank.cli import main\n"
          "main(sys.argv[1:])\n"
          "print('compiled', n['/jax/compilation_cache/cache_misses'],"
          " n['/jax/compilation_cache/cache_hits'])\n")
  env = dict(os.environ, T5RANK_COMPILATION_CACHE="1", T5RANK_CACHE_DIR=str(tmp_path / "cache"),
             PYTHONPATH=REPO)
  counts = []
  for run in ("first", "second"):
    done = subprocess.run(
        [sys.executable, "-c", code, "score", "--checkpoint", str(tmp_path / "ckpt"), "--queries",
         str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
         str(tmp_path / "run"), "--output", str(tmp_path / f"{run}.run"), "--window", "0"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    counts.append(tuple(int(x) for x in done.stdout.split("compiled ")[-1].split()))
  (misses, hits), again = counts
  assert misses >= 1 and hits == 0 and again == (0, misses), counts  # all read from the cache
  assert (tmp_path / "first.run").read_text() == (tmp_path / "second.run").read_text()
  [directory] = os.listdir(tmp_path / "cache")
  assert directory == f"jax-{jax.__version__}-jaxlib-{jaxlib.__version__}-t5rank-0.1.0"
  assert len(os.listdir(tmp_path / "cache" / directory)) >= misses
  # and off: nothing is written
  env.update(T5RANK_COMPILATION_CACHE="0", T5RANK_CACHE_DIR=str(tmp_path / "none"))
  done = subprocess.run([sys.executable, "-m", "t5rank.cli", "score", "--checkpoint",
                         str(tmp_path / "ckpt"), "--queries", str(tmp_path / "q.tsv"), "--corpus",
                         str(tmp_path / "c.tsv"), "--run", str(tmp_path / "run"), "--output",
                         str(tmp_path / "third.run"), "--window", "0"], env=env,
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr
  assert not (tmp_path / "none").exists()


def test_bfloat16_on_a_cpu_without_its_instructions_is_said_to_be_emulated():
  from t5rank.ranking.devices import bfloat16_note

  zen3 = {"avx2", "fma", "f16c", "avx"}  # an AMD EPYC of this VM kind: no avx512 at all
  genoa = {"avx2", "avx512f", "avx512_bf16"}
  sapphire = {"avx2", "avx512f", "amx_bf16", "amx_tile"}
  assert "emulated" in bfloat16_note("bfloat16", "cpu", zen3)
  assert bfloat16_note("bfloat16", "cpu", genoa) is None
  assert bfloat16_note("bfloat16", "cpu", sapphire) is None
  assert bfloat16_note("float32", "cpu", zen3) is None
  assert bfloat16_note("bfloat16", "gpu", zen3) is None
  assert bfloat16_note("bfloat16", "cpu", set()) is None  # flags unknown: nothing claimed


def test_a_narrower_t5_takes_more_tokens_a_batch_on_a_cpu():
  mesh = scoring_mesh()
  groups = mesh.shape["data"]
  assert default_batch_tokens(mesh) == 2048 * groups
  # T5-small's width and wider: the CPU's 2048 tokens; narrower: 512 // d_model times that
  assert [default_batch_tokens(mesh, width) // groups for width in (512, 768, 1024, 100, 64)] == \
      [2048, 2048, 2048, 5 * 2048, 16384]
  monot5 = MonoT5(micro_config(d_model=32), load_vocabulary(), (1176, 6136), max_length=32)
  assert monot5.width == 32
  options = scorer.ScoringOptions()
  key = scorer.scoring_key(monot5, random_params(monot5.config), options, model_id="m")
  assert key["batch_tokens"] == 16 * 2048 * groups
  t5_dual_encoder = T5DualEncoderConfig(t5=micro_config(d_model=64), vocabulary="v.model")
  assert T5DualEncoderReranker(t5_dual_encoder, None).width == 64
  # a GPU keeps its own size whatever the width
  gpu = type("Mesh", (), {"devices": np.array([type("D", (), {"platform": "gpu"})()]),
                          "shape": {"data": 1}})()
  assert default_batch_tokens(gpu, 64) == 131072


def test_the_larger_batches_give_the_same_scores():
  reranker = MonoT5(CONFIG, load_vocabulary(), (1176, 6136), max_length=64)
  params = random_params(CONFIG, std=0.2)
  rng = np.random.default_rng(0)
  words = "car home policy claim premium life health annuity renters deductible".split()
  passages = [" ".join(rng.choice(words, size=rng.integers(1, 40))) for _ in range(60)]
  queries = ["what does car insurance cover"] * len(passages)
  assert default_batch_tokens(scoring_mesh(), reranker.width) > 2048 * scoring_mesh().shape["data"]
  big, _ = scorer.score_pairs(reranker, params, queries, passages)
  small, _ = scorer.score_pairs(reranker, params, queries, passages, batch_tokens=128)
  np.testing.assert_allclose(big, small, rtol=0, atol=1e-5)
