"""The (data, model) mesh: shapes, the logical rules, and the same losses on 1 device and on 8.

The 8 fake CPU devices exist only in a subprocess (`XLA_FLAGS` must be set before JAX starts), so
the other test modules keep their single device.
"""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from t5rank import partitioning

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EIGHT_DEVICES_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import jax, numpy as np, optax
import train_fixtures as fx
from t5rank import partitioning
from t5rank.training import trainer as train
from t5rank.training.seq2seq import Seq2Seq
from t5rank.models.config import get_config
from t5rank.models.network import init_params, param_axes

assert jax.device_count() == 8, jax.devices()
config = get_config("tiny", **fx.TINY_OVERRIDES).replace(dropout_rate=0.0)
lengths = {{"inputs": 16, "targets": 2}}
batches = fx.synthetic_dataset("x", batch_size=8, feature_lengths=lengths, seed=0)
batches = [next(batches) for _ in range(3)]
out = {{}}
for name, shape, n in [("1x1", (1, 1), 1), ("8x1", (8, 1), 8), ("1x4", (1, 4), 4),
                       ("4x2", (4, 2), 8)]:
  mesh = partitioning.create_mesh(shape, jax.devices()[:n])
  schedule = optax.constant_schedule(1e-2)
  trainer = train.make_trainer(Seq2Seq(config), mesh, optimizer=train.adafactor(schedule),
                               schedule=schedule)
  state = trainer.init_fn(init_params(config, jax.random.PRNGKey(0)))
  losses = []
  for batch in batches:
    state, metrics = trainer.step_fn(state, partitioning.global_batch(mesh, batch, 8))
    losses.append(float(metrics["loss"]))
  wi = state["params"]["encoder"]["layers_0"]["mlp"]["wi"]["kernel"]
  out[name] = {{"losses": losses, "wi_spec": str(wi.sharding.spec),
               "wi_shard": list(wi.addressable_shards[0].data.shape),
               "batch_shard": list(partitioning.global_batch(mesh, batches[0], 8)[
                   "encoder_input_tokens"].addressable_shards[0].data.shape),
               "host_shard": list(partitioning.host_data_shard(mesh, 8))}}
try:
  six_heads = config.replace(num_heads=6)  # the network's parameter shapes, split by the rules
  shapes = jax.eval_shape(lambda key: init_params(six_heads, key), jax.random.PRNGKey(0))
  partitioning.shardings_for(shapes, param_axes(six_heads), partitioning.create_mesh((2, 4)))
except ValueError as e:
  out["error"] = str(e)
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def eight_devices():
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
             TF_CPP_MIN_LOG_LEVEL="3")
  script = EIGHT_DEVICES_SCRIPT.format(tests=os.path.join(REPO, "tests"))
  proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True,
                        text=True, timeout=600)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
  assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
  return json.loads(lines[-1][len("RESULT "):])


def test_data_model_and_both_meshes_give_the_single_device_losses(eight_devices):
  reference = eight_devices["1x1"]["losses"]
  assert reference[2] < reference[0]  # the steps do change the parameters
  for name in ("8x1", "1x4", "4x2"):
    np.testing.assert_allclose(eight_devices[name]["losses"], reference, rtol=2e-5, err_msg=name)


def test_rules_split_weights_over_model_and_the_batch_over_data(eight_devices):
  # wi is (embed=32, mlp=64): mlp -> model, embed replicated; the batch of 8 rows goes over data.
  assert eight_devices["1x1"]["wi_shard"] == [32, 64]
  assert eight_devices["8x1"]["wi_shard"] == [32, 64]
  assert eight_devices["1x4"]["wi_shard"] == [32, 16]
  assert eight_devices["4x2"]["wi_shard"] == [32, 32]
  assert eight_devices["4x2"]["wi_spec"] == "P(None, 'model')"
  assert eight_devices["8x1"]["batch_shard"] == [1, 16]
  assert eight_devices["4x2"]["batch_shard"] == [2, 16]
  assert eight_devices["1x4"]["batch_shard"] == [8, 16]
  assert eight_devices["4x2"]["host_shard"] == [0, 1]  # one host reads the whole batch


def test_indivisible_model_dimension_names_it(eight_devices):
  assert "heads=6" in eight_devices["error"] and "model=4" in eight_devices["error"]


def test_create_mesh_checks_the_device_count():
  mesh = partitioning.create_mesh((-1, 1))
  assert dict(mesh.shape) == {"data": jax.device_count(), "model": 1}
  with pytest.raises(ValueError, match="needs 16 devices"):
    partitioning.create_mesh((16, 1))
  with pytest.raises(ValueError, match="one -1"):
    partitioning.create_mesh((-1, -1))
