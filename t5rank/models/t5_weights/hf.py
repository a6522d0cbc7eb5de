"""Hugging Face T5 / mT5 checkpoints (`config.json` + weights), read and written without torch.

Import reads the weights in one of three formats, the first a directory has in this order (each
one file or the shards its `.index.json` lists):
  1. `model.safetensors` (`model.safetensors.index.json`);
  2. `flax_model.msgpack` (`flax_model.msgpack.index.json`), Hugging Face Flax's tree, read with
     `flax.serialization.msgpack_restore`; its names are mapped to the PyTorch names below
     (`shared/embedding` -> `shared.weight`, `.../q/kernel` (in, out) -> `....q.weight` (out, in),
     `relative_attention_bias/embedding` -> `.weight`, both (buckets, heads));
  3. `pytorch_model.bin` (`pytorch_model.bin.index.json`), torch's pickle read by
     `t5rank.checkpoints.torch_pickle`, which runs none of it.
(`t5rank.checkpoints.formats` finds and reads those files; this module maps their tensors onto
t5rank's T5.)
Export writes one `model.safetensors` and a `config.json` that `transformers.
T5ForConditionalGeneration.from_pretrained` loads. Layout differences from t5rank:
  - torch Linear weights are (out, in): every kernel is transposed;
  - `relative_attention_bias` is an embedding (buckets, heads) in block 0: transposed to (heads,
    buckets);
  - the input embedding is `shared.weight`; `encoder.embed_tokens.weight`, `decoder.embed_tokens.
    weight` (and `lm_head.weight` when tied) are copies of it that may or may not be stored.

Two generations of config.json describe the output layer differently:
  - transformers 4.x (every config on the Hub before 5.0): `tie_word_embeddings` says both that the
    head is the shared embedding and that the decoder output is scaled by d_model**-0.5 (T5 v1.0:
    true; T5 v1.1 and mT5: false, with `lm_head.weight`);
  - transformers 5.x: `tie_word_embeddings` is always written true and a separate
    `scale_decoder_outputs` says whether the output is scaled; the head is `lm_head.weight` when the
    file has it, else the shared embedding. Its mT5 (`model_type` mt5) has no such key: never
    scaled, the head as for its T5.
The reader tells them apart by the `scale_decoder_outputs` key, and an mT5's by the
`transformers_version` its config.json records. The writer writes either
(`generation="4"`, the default, which 4.x and 5.x both read; or `"5"`, as 5.x saves: no
`lm_head.weight` when tied). A 4.x config cannot say "tied but not scaled" or "untied but scaled":
such a model is written in the 5.x form only.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional

import numpy as np

from t5rank.checkpoints.formats import CONFIG_FILE, WEIGHTS_FILE, hf_tensors
from t5rank.checkpoints.tree import CheckpointError, Params, write_atomically, write_json
from t5rank.models.config import T5Config
from t5rank.models.t5_weights.layout import (export_tensors, import_tensors, module_path,
                                             tensor_names)

SHARED = "shared.weight"
EMBEDDING_COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
LM_HEAD = "lm_head.weight"
SCALE_KEY = "scale_decoder_outputs"  # transformers 5.x
GENERATIONS = ("4", "5")

# Hugging Face T5Config defaults, for fields an older config.json leaves out.
_HF_DEFAULTS = {"vocab_size": 32128, "d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6,
                "num_heads": 8, "relative_attention_num_buckets": 32,
                "relative_attention_max_distance": 128, "dropout_rate": 0.1,
                "layer_norm_epsilon": 1e-6, "feed_forward_proj": "relu",
                "tie_word_embeddings": True}


def config_from_hf(hf: Mapping[str, Any], has_lm_head: Optional[bool] = None) -> T5Config:
  """T5Config of a Hugging Face T5/mT5 config.json (as a dict) of either generation (module
  docstring); `has_lm_head` says whether the weights hold `lm_head.weight` (what decides a 5.x
  head; None: as the config says). A combination t5rank cannot represent exactly raises
  CheckpointError naming the keys."""
  if hf.get("model_type", "t5") not in ("t5", "mt5"):
    raise CheckpointError(f"config.json has model_type {hf['model_type']!r}; only 't5' and 'mt5' "
                          "checkpoints can be imported")
  get = lambda key: hf.get(key, _HF_DEFAULTS.get(key))
  feed_forward = get("feed_forward_proj")
  if feed_forward not in ("relu", "gated-gelu"):
    raise CheckpointError(f"config.json has feed_forward_proj {feed_forward!r}; t5rank implements "
                          "'relu' (T5 v1.0) and 'gated-gelu' (T5 v1.1, mT5)")
  tie = get("tie_word_embeddings")
  if not isinstance(tie, bool):
    raise CheckpointError(f"config.json has tie_word_embeddings {tie!r}; expected true or false")
  if SCALE_KEY in hf or _saved_by_mt5_of_5x(hf):  # transformers 5.x
    scale = hf.get(SCALE_KEY, False)
    if not isinstance(scale, bool):
      raise CheckpointError(f"config.json has {SCALE_KEY} {scale!r}; expected true or false")
    tied = tie if has_lm_head is None else not has_lm_head
    if not tie and tied:
      raise CheckpointError(f"config.json says tie_word_embeddings false and {SCALE_KEY} "
                            f"{str(scale).lower()}, but the weights hold no {LM_HEAD!r}: there is "
                            "no output layer")
  else:  # transformers 4.x: one key for both facts
    tied = scale = tie
    if not tie and has_lm_head is False:
      raise CheckpointError(f"config.json says tie_word_embeddings false but the weights hold no "
                            f"{LM_HEAD!r}")
  return T5Config(
      vocab_size=get("vocab_size"), d_model=get("d_model"), num_heads=get("num_heads"),
      d_kv=get("d_kv"), d_ff=get("d_ff"), num_encoder_layers=get("num_layers"),
      num_decoder_layers=hf.get("num_decoder_layers") or get("num_layers"),
      feed_forward=feed_forward, tie_embeddings=tied, scale_decoder_outputs=scale,
      relative_attention_num_buckets=get("relative_attention_num_buckets"),
      relative_attention_max_distance=get("relative_attention_max_distance"),
      dropout_rate=get("dropout_rate"), layer_norm_epsilon=get("layer_norm_epsilon"))


def _saved_by_mt5_of_5x(hf: Mapping[str, Any]) -> bool:
  """Whether config.json is an mT5's written by transformers 5 or later, whose MT5 never scales the
  decoder output and reads `tie_word_embeddings` as its T5 does (module docstring)."""
  version = str(hf.get("transformers_version", "0"))
  major = version.split(".")[0]
  return hf.get("model_type") == "mt5" and major.isdigit() and int(major) >= 5


def config_to_hf(config: T5Config, generation: str = "4") -> dict[str, Any]:
  """Hugging Face config.json (as a dict) of a T5Config in the form of transformers `generation`
  ("4" or "5", module docstring); pad 0, EOS 1, decoder start 0."""
  if generation not in GENERATIONS:
    raise ValueError(f"unknown config generation {generation!r}; choose one of {GENERATIONS}")
  if generation == "4" and config.tie_embeddings != config.scale_decoder_outputs:
    raise CheckpointError(
        f"a transformers 4.x config.json cannot describe this model (tie_embeddings "
        f"{config.tie_embeddings}, scale_decoder_outputs {config.scale_decoder_outputs}): its "
        "tie_word_embeddings means both; write the 5.x form (generation 5, `t5rank convert "
        "--hf-generation 5`)")
  hf = _config_to_hf4(config)
  if generation == "5":
    hf.update({"tie_word_embeddings": True, SCALE_KEY: config.scale_decoder_outputs})
  return hf


def _config_to_hf4(config: T5Config) -> dict[str, Any]:
  """The 4.x config.json (tie_word_embeddings for both facts)."""
  return {
      "architectures": ["T5ForConditionalGeneration"], "model_type": "t5",
      "is_encoder_decoder": True, "vocab_size": config.vocab_size, "d_model": config.d_model,
      "d_kv": config.d_kv, "d_ff": config.d_ff, "num_layers": config.num_encoder_layers,
      "num_decoder_layers": config.num_decoder_layers, "num_heads": config.num_heads,
      "relative_attention_num_buckets": config.relative_attention_num_buckets,
      "relative_attention_max_distance": config.relative_attention_max_distance,
      "dropout_rate": config.dropout_rate, "layer_norm_epsilon": config.layer_norm_epsilon,
      "feed_forward_proj": config.feed_forward, "tie_word_embeddings": config.tie_embeddings,
      "initializer_factor": 1.0, "pad_token_id": 0, "eos_token_id": 1,
      "decoder_start_token_id": 0, "use_cache": True,
  }


def hf_name(name: str) -> tuple[str, bool]:
  """(Hugging Face tensor name, stored transposed) of t5rank parameter `name`."""
  path = module_path(name)
  if path.module == "shared":
    return SHARED, False
  if path.module == "logits":
    return LM_HEAD, True
  if path.module == "final_layer_norm":
    return f"{path.stack}.final_layer_norm.weight", False
  prefix = f"{path.stack}.block.{path.block}.layer.{path.sublayer}.{path.module}"
  if path.module == "layer_norm":
    return f"{prefix}.weight", False
  return f"{prefix}.{path.weight}.weight", True


def load_hf_checkpoint(directory: str) -> tuple[T5Config, Params]:
  """(config, float32 params) of the Hugging Face T5/mT5 checkpoint in `directory`."""
  with open(os.path.join(directory, CONFIG_FILE)) as f:
    hf = json.load(f)
  config_from_hf(hf)  # a config that is no T5 fails before the weights are opened
  shapes, read = hf_tensors(directory)
  config = config_from_hf(hf, has_lm_head=LM_HEAD in shapes)
  copies = list(EMBEDDING_COPIES) + ([LM_HEAD] if config.tie_embeddings else [])
  stored_copies = [name for name in copies if name in shapes]
  if SHARED not in shapes and stored_copies:  # some exports keep a copy but not `shared.weight`
    primary = stored_copies.pop(0)
    shapes[SHARED] = shapes.pop(primary)
    read_stored = read
    read = lambda key: read_stored(primary if key == SHARED else key)
  source = f"Hugging Face checkpoint {directory}"
  params = import_tensors(source, shapes, read, tensor_names(config, hf_name), config,
                          ignore=stored_copies.__contains__)
  embedding = params["token_embedder"]["embedding"]
  for name in stored_copies:
    if shapes[name] != embedding.shape or not np.array_equal(read(name), embedding):
      raise CheckpointError(
          f"{source}: {name!r} differs from {SHARED!r}; t5rank shares one input embedding between "
          "encoder and decoder" + (" and, with tie_word_embeddings, the output layer"
                                   if config.tie_embeddings else ""))
  return config, params


def save_hf_checkpoint(directory: str, params: Mapping[str, Any], config: T5Config,
                       generation: str = "4") -> None:
  """Writes `params` as `model.safetensors` and `config` as `config.json` into `directory`, the
  config in the form of transformers `generation` ("4", the default, or "5"; module docstring)."""
  from safetensors.numpy import save_file

  hf = config_to_hf(config, generation)  # refuses what the generation cannot say, before writing
  tensors = export_tensors(params, config, hf_name)
  os.makedirs(directory, exist_ok=True)
  # transformers refuses safetensors files without a "format" entry.
  write_atomically(os.path.join(directory, WEIGHTS_FILE),
                   lambda tmp: save_file(tensors, tmp, metadata={"format": "pt"}))
  write_json(os.path.join(directory, CONFIG_FILE), hf)
