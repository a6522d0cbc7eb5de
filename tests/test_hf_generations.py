"""Hugging Face checkpoints as transformers 4.x and 5.x write them, and the t5x export.

transformers 5 writes `tie_word_embeddings: true` for every T5/mT5 and a separate
`scale_decoder_outputs`; the head is `lm_head.weight` when the file has it. These tests write both
forms of the same weights (config keys and tensor names as each generation saves them, no torch)
and check that t5rank reads the same model, with the same log P, from either.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from t5rank.checkpoints.tree import CheckpointError, flatten
from t5rank.cli import main as cli_main
from t5rank.models.config import T5Config
from t5rank.models.monot5 import monot5_score
from t5rank.models.t5_weights import load_checkpoint, save_checkpoint
from t5rank.models.t5_weights.hf import LM_HEAD, SCALE_KEY, config_to_hf, save_hf_checkpoint
from t5rank.models.t5_weights.t5x import load_t5x_checkpoint, save_t5x_checkpoint
from t5rank.testing import random_params

TINY = dict(vocab_size=64, d_model=16, num_heads=2, d_kv=4, d_ff=24, num_encoder_layers=2,
            num_decoder_layers=2, relative_attention_num_buckets=8, dropout_rate=0.0)
MODELS = {
    "v1_0": T5Config(**TINY, feed_forward="relu", tie_embeddings=True),
    "v1_1": T5Config(**TINY, feed_forward="gated-gelu", tie_embeddings=False),
    "mt5": T5Config(**{**TINY, "num_decoder_layers": 3}, feed_forward="gated-gelu",
                    tie_embeddings=False),
}
TOKENS = np.array([[5, 9, 13, 40, 2, 1, 0, 0], [7, 7, 30, 1, 0, 0, 0, 0]], np.int32)


def log_p(config, params):
  return np.asarray(monot5_score(params, TOKENS, config=config, target_ids=(11, 12))[0])


def test_config_keeps_the_two_facts_and_reads_old_json():
  assert MODELS["v1_0"].scale_decoder_outputs is True  # None means "as tie_embeddings"
  assert MODELS["v1_1"].scale_decoder_outputs is False
  old = json.loads(MODELS["v1_0"].to_json())
  del old["scale_decoder_outputs"]  # a config.json written before the field existed
  assert T5Config.from_json(json.dumps(old)) == MODELS["v1_0"]
  tied_unscaled = MODELS["v1_0"].replace(scale_decoder_outputs=False)
  assert T5Config.from_json(tied_unscaled.to_json()) == tied_unscaled


@pytest.mark.parametrize("name", list(MODELS))
def test_5x_form_gives_the_same_model_and_log_p_as_4x(tmp_path, name):
  config = MODELS[name]
  params = random_params(config, std=0.5)
  save_hf_checkpoint(str(tmp_path / "4"), params, config)
  save_hf_checkpoint(str(tmp_path / "5"), params, config, generation="5")
  hf4 = json.loads((tmp_path / "4" / "config.json").read_text())
  hf5 = json.loads((tmp_path / "5" / "config.json").read_text())
  assert SCALE_KEY not in hf4 and hf4["tie_word_embeddings"] is config.tie_embeddings
  assert hf5["tie_word_embeddings"] is True and hf5[SCALE_KEY] is config.scale_decoder_outputs
  has_head = LM_HEAD in load_file(str(tmp_path / "5" / "model.safetensors"))
  assert has_head is (not config.tie_embeddings)  # 5.x stores no lm_head.weight when tied
  read4, params4 = load_checkpoint(str(tmp_path / "4"))
  read5, params5 = load_checkpoint(str(tmp_path / "5"))
  assert read4 == read5 == config
  np.testing.assert_array_equal(log_p(read4, params4), log_p(read5, params5))


def test_a_5x_v1_1_file_is_no_longer_read_as_v1_0(tmp_path):
  """The reported bug: tie_word_embeddings true (5.x always) with lm_head.weight and
  scale_decoder_outputs false was read as tied and scaled, log P off by nats."""
  config = MODELS["v1_1"]
  params = random_params(config, std=0.5)
  save_hf_checkpoint(str(tmp_path), params, config, generation="5")
  read, read_params = load_checkpoint(str(tmp_path))
  assert (read.tie_embeddings, read.scale_decoder_outputs) == (False, False)
  np.testing.assert_allclose(log_p(read, read_params), log_p(config, params), atol=1e-6)
  as_v1_0 = config.replace(tie_embeddings=True)  # what the old reader made of it
  wrong = log_p(as_v1_0, params)  # the same weights, the head taken from the embedding
  assert np.abs(wrong - log_p(config, params)).max() > 1e-3


def test_tied_but_unscaled_exists_only_in_the_5x_form(tmp_path):
  config = MODELS["v1_0"].replace(scale_decoder_outputs=False)
  params = random_params(config, std=0.5)
  with pytest.raises(CheckpointError, match="tie_embeddings True, scale_decoder_outputs False"):
    save_hf_checkpoint(str(tmp_path / "4"), params, config)
  assert not (tmp_path / "4").exists()  # refused before anything was written
  save_hf_checkpoint(str(tmp_path / "5"), params, config, generation="5")
  read, read_params = load_checkpoint(str(tmp_path / "5"))
  assert read == config
  scaled = log_p(MODELS["v1_0"], params)
  assert np.abs(log_p(read, read_params) - scaled).max() > 1e-3  # the scale changes the scores


@pytest.mark.parametrize("generation, keys, message", [
    ("5", {"tie_word_embeddings": False, SCALE_KEY: False}, "no output layer"),
    ("4", {"tie_word_embeddings": False}, "tie_word_embeddings false but the weights hold no"),
    ("5", {SCALE_KEY: "yes"}, "scale_decoder_outputs 'yes'; expected true or false"),
])
def test_configs_that_describe_no_model_name_the_keys(tmp_path, generation, keys, message):
  config = MODELS["v1_0"]
  save_hf_checkpoint(str(tmp_path), random_params(config, std=0.5), config, generation=generation)
  hf = json.loads((tmp_path / "config.json").read_text())
  hf.update(keys)
  (tmp_path / "config.json").write_text(json.dumps(hf))
  tensors = load_file(str(tmp_path / "model.safetensors"))
  tensors.pop(LM_HEAD, None)
  save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
  with pytest.raises(CheckpointError, match=message):
    load_checkpoint(str(tmp_path))


@pytest.mark.parametrize("generation", ["4", "5"])
def test_convert_round_trips_both_generations(tmp_path, generation):
  config = MODELS["mt5"]
  params = random_params(config, std=0.5)
  save_checkpoint(str(tmp_path / "native"), params, config)
  assert cli_main(["convert", "--input", str(tmp_path / "native"), "--output",
                   str(tmp_path / "hf"), "--to", "hf", "--hf-generation", generation]) == 0
  assert cli_main(["convert", "--input", str(tmp_path / "hf"), "--output", str(tmp_path / "back"),
                   "--to", "native"]) == 0
  read, back = load_checkpoint(str(tmp_path / "back"))
  assert read == config
  for name, value in flatten(params).items():
    assert np.array_equal(flatten(back)[name], value), name
  assert config_to_hf(config, generation)["tie_word_embeddings"] is (generation == "5")


@pytest.mark.parametrize("name", ["v1_0", "mt5"])
def test_t5x_export_reads_back_bitwise_with_t5x_names(tmp_path, name):
  config = MODELS[name]
  params = random_params(config, std=0.5)
  save_checkpoint(str(tmp_path / "native"), params, config)
  assert cli_main(["convert", "--input", str(tmp_path / "native"), "--output",
                   str(tmp_path / "t5x"), "--to", "t5x", "--step", "1100000"]) == 0
  step_dir = tmp_path / "t5x" / "checkpoint_1100000"
  assert (step_dir / "state" / "_METADATA").is_file()
  read, back = load_t5x_checkpoint(str(tmp_path / "t5x"), config)  # the latest step
  assert read == config
  for key, value in flatten(params).items():
    assert back_value_equal(back, key, value), key
  import orbax.checkpoint as ocp
  tree = ocp.PyTreeCheckpointer().restore(str(step_dir / "state"))
  assert int(tree["state"]["step"]) == 1100000
  assert "token_embedder" in tree["target"] and "layers_0" in tree["target"]["encoder"]
  assert ("logits_dense" in tree["target"]["decoder"]) is (not config.tie_embeddings)
  with pytest.raises(SystemExit, match="holds an earlier output of this command; give --overwrite"):
    cli_main(["convert", "--input", str(tmp_path / "native"), "--output", str(tmp_path / "t5x"),
              "--to", "t5x", "--step", "1100000"])


def back_value_equal(tree, key, value) -> bool:
  return np.array_equal(flatten(tree)[key], value)


def test_t5x_refuses_a_model_it_cannot_describe(tmp_path):
  config = MODELS["v1_1"].replace(scale_decoder_outputs=True)
  with pytest.raises(CheckpointError, match="t5x cannot describe this model"):
    save_t5x_checkpoint(str(tmp_path), random_params(config, std=0.5), config)
