"""The scorer shards the model the way the trainer does: on 8 fake CPU devices, a (1, 8), (2, 4)
and (8, 1) mesh give the single-device scores; parameters are split by the logical-axis rules; the
per-device bytes worked out from shapes equal what the devices hold; bfloat16 stays close.

The 8 devices exist only in a subprocess (`XLA_FLAGS` must be set before JAX starts).
"""

import json
import os
import subprocess
import sys

import pytest

from t5rank import partitioning
from t5rank.models.config import get_config
from t5rank.models.network import param_axes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
import json
import jax, numpy as np
from t5rank import partitioning
from t5rank.models.monot5 import MonoT5
from t5rank.models.reranker import cast_params
from t5rank.models.vocab import load_vocabulary, resolve_target_words
from t5rank.ranking.devices import place_params
from t5rank.ranking.scorer import score_pairs
from t5rank.testing import micro_config, random_params

assert jax.device_count() == 8, jax.devices()
config = micro_config(num_heads=8, d_kv=4)  # every split dimension divisible by 8
vocab = load_vocabulary()
params = random_params(config, std=0.2)
reranker = MonoT5(config, vocab, resolve_target_words(vocab, "true_false"), max_length=64)
words = "policy cover claim premium term life car home rate cash value loan".split()
rng = np.random.default_rng(0)
queries = [" ".join(rng.choice(words, 3)) for _ in range(37)]
passages = [" ".join(rng.choice(words, int(n))) for n in rng.integers(1, 40, 37)]
out = {}
for name, shape, n in [("single", (1, 1), 1), ("1x8", (1, 8), 8), ("2x4", (2, 4), 8),
                       ("8x1", (8, 1), 8)]:
  mesh = partitioning.create_mesh(shape, jax.devices()[:n])
  scores, p = score_pairs(reranker, params, queries, passages, mesh=mesh, batch_tokens=1024)
  placed = place_params(params, reranker.param_axes(), mesh)
  wi = placed["encoder"]["layers_0"]["mlp"]["wi"]["kernel"]
  held = max(sum(s.data.nbytes for leaf in jax.tree.leaves(placed)
                 for s in leaf.addressable_shards if s.device == d) for d in mesh.devices.flat)
  out[name] = {"scores": scores.tolist(), "p": p.tolist(), "wi_shard": list(wi.addressable_shards[0].data.shape),
               "held": held}
bf16 = MonoT5(config.replace(dtype="bfloat16"), vocab, reranker.target_ids, max_length=64)
mesh = partitioning.create_mesh((2, 4))
out["bfloat16"] = score_pairs(bf16, cast_params(params, "bfloat16"), queries, passages,
                              mesh=mesh)[0].tolist()
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def meshes():
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
             TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
  proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=REPO, capture_output=True,
                        text=True, timeout=600)
  lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
  assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
  return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("name", ["1x8", "2x4", "8x1"])
def test_every_mesh_gives_the_single_device_scores(meshes, name):
  import numpy as np

  single = np.array(meshes["single"]["scores"])
  assert np.all(np.isfinite(single)) and np.ptp(single) > 0.01  # the pairs are told apart
  np.testing.assert_allclose(meshes[name]["scores"], single, rtol=0, atol=2e-5)
  np.testing.assert_allclose(meshes[name]["p"], meshes["single"]["p"], rtol=0, atol=2e-5)


def test_parameters_are_split_over_model_by_the_rules(meshes):
  # wi: (d_model 32, d_ff 64) with logical axes (embed, mlp): mlp goes to `model`.
  assert meshes["single"]["wi_shard"] == [32, 64]
  assert meshes["8x1"]["wi_shard"] == [32, 64]  # replicated over data
  assert meshes["2x4"]["wi_shard"] == [32, 16]
  assert meshes["1x8"]["wi_shard"] == [32, 8]


def test_bytes_per_device_from_shapes_equal_what_the_devices_hold(meshes):
  import jax

  from t5rank.models.network import init_params
  from t5rank.testing import micro_config

  config = micro_config(num_heads=8, d_kv=4)
  shapes = jax.eval_shape(lambda: init_params(config, jax.random.PRNGKey(0)))
  for name, shape in [("single", (1, 1)), ("1x8", (1, 8)), ("2x4", (2, 4)), ("8x1", (8, 1))]:
    assert partitioning.param_bytes_per_device(shapes, param_axes(config), shape) == \
        meshes[name]["held"], name
  assert meshes["1x8"]["held"] < meshes["2x4"]["held"] < meshes["8x1"]["held"]


def test_bfloat16_scores_stay_close_to_float32(meshes):
  import numpy as np

  difference = np.abs(np.array(meshes["bfloat16"]) - np.array(meshes["single"]["scores"]))
  assert difference.max() < 0.05 and difference.max() > 0  # cast, and not far off


def test_3b_and_11b_on_a_tpu_v3_8():
  """The figures of docs/cloud_tpu.md (scripts/mesh_memory.py prints them): T5-3B replicated in
  float32 holds 11.4 GB per core of a v3 core's 16 GiB; split 8 ways it is
  1.4 GB. 11B (45 GB in float32) fits only split over model."""
  from scripts.mesh_memory import per_device_gb

  assert per_device_gb("t5_3B", (8, 1), "float32") == pytest.approx(11.41, abs=0.01)
  assert per_device_gb("t5_3B", (1, 8), "float32") == pytest.approx(1.43, abs=0.01)
  assert per_device_gb("t5_11B", (8, 1), "float32") == pytest.approx(45.23, abs=0.01)
  assert per_device_gb("t5_11B", (1, 8), "float32") == pytest.approx(5.65, abs=0.01)
  assert per_device_gb("t5_11B", (2, 4), "bfloat16") == pytest.approx(5.65, abs=0.01)


def test_indivisible_mesh_names_the_parameter():
  import jax

  from t5rank.models.network import init_params

  config = get_config("tiny")  # d_model 64, 4 heads
  shapes = jax.eval_shape(lambda: init_params(config, jax.random.PRNGKey(0)))
  with pytest.raises(ValueError, match=r"parameter .*: dimension \w+=\d+ is not divisible by "
                     r"mesh axis model=3"):
    partitioning.check_param_dims(shapes, param_axes(config), {"data": 1, "model": 3})
  partitioning.check_param_dims(shapes, param_axes(config), {"data": 3, "model": 2})
