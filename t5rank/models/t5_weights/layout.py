"""What the T5 weight formats share: t5rank's T5 parameter names and shapes, the T5 module layout
that Hugging Face and Mesh TensorFlow name their tensors after, and the checked copy from a foreign
set of named tensors into t5rank's parameter tree.

t5rank's parameters are named as in t5x (`encoder/layers_0/attention/query/kernel`, see
`t5rank.models.network`). Hugging Face and Mesh TensorFlow name the same tensors after the original T5
modules (`encoder.block.0.layer.0.SelfAttention.q.weight`,
`encoder/block_000/layer_000/SelfAttention/q`); `module_path` gives that layout once for both.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Callable, Mapping, Optional

import numpy as np

from t5rank.checkpoints.tree import CheckpointError, Params, Shape, flatten, unflatten
from t5rank.checkpoints.untrusted import quote
from t5rank.models.config import CONFIGS, T5Config

MAX_LISTED = 12  # tensors named per kind of problem in one error message


# Fields of T5Config that fix parameter shapes or the function the network computes; `dropout_rate`
# and `dtype` are run choices, not properties of a checkpoint.
ARCHITECTURE_FIELDS = ("vocab_size", "d_model", "num_heads", "d_kv", "d_ff", "num_encoder_layers",
                       "num_decoder_layers", "feed_forward", "tie_embeddings",
                       "scale_decoder_outputs", "relative_attention_num_buckets",
                       "relative_attention_max_distance",
                       "layer_norm_epsilon")


@functools.lru_cache(maxsize=16)
def param_shapes(config: T5Config) -> dict[str, Shape]:
  """Every parameter of the network `config` describes: flat t5rank name -> shape."""
  import flax.linen as nn
  from t5rank.models.network import abstract_params
  return {name: tuple(leaf.shape)
          for name, leaf in flatten(nn.unbox(abstract_params(config))).items()}


@dataclasses.dataclass(frozen=True)
class ModulePath:
  """Where a t5rank parameter sits among the original T5 modules.

  `stack` is "encoder" or "decoder" (None for the shared embedding); `block` and `sublayer` index
  `block_i/layer_j` (None outside blocks); `module` is SelfAttention, EncDecAttention,
  DenseReluDense, layer_norm, final_layer_norm, shared or logits; `weight` is q/k/v/o,
  relative_attention_bias, wi/wi_0/wi_1/wo, or None for a module's single weight.
  """
  stack: Optional[str]
  block: Optional[int]
  sublayer: Optional[int]
  module: str
  weight: Optional[str]


_QKVO = {"query": "q", "key": "k", "value": "v", "out": "o"}
# (t5rank layer child, encoder sublayer, decoder sublayer, T5 module)
_SUBLAYERS = {
    "attention": (0, None, "SelfAttention"),
    "self_attention": (None, 0, "SelfAttention"),
    "encoder_decoder_attention": (None, 1, "EncDecAttention"),
    "mlp": (1, 2, "DenseReluDense"),
    "pre_attention_layer_norm": (0, None, "layer_norm"),
    "pre_self_attention_layer_norm": (None, 0, "layer_norm"),
    "pre_cross_attention_layer_norm": (None, 1, "layer_norm"),
    "pre_mlp_layer_norm": (1, 2, "layer_norm"),
}


def module_path(name: str) -> ModulePath:
  """The T5 module layout of t5rank parameter `name` (e.g. `decoder/layers_3/mlp/wi_0/kernel` ->
  decoder, block 3, sublayer 2, DenseReluDense, wi_0)."""
  if name == "token_embedder/embedding":
    return ModulePath(None, None, None, "shared", None)
  if name == "decoder/logits_dense/kernel":
    return ModulePath("decoder", None, None, "logits", None)
  match = re.fullmatch(r"(encoder|decoder)/(encoder|decoder)_norm/scale", name)
  if match:
    return ModulePath(match[1], None, None, "final_layer_norm", None)
  match = re.fullmatch(r"(encoder|decoder)/relpos_bias/rel_embedding", name)
  if match:  # T5 keeps the stack's one relative position bias in the first block's self-attention.
    return ModulePath(match[1], 0, 0, "SelfAttention", "relative_attention_bias")
  match = re.fullmatch(r"(encoder|decoder)/layers_(\d+)/(\w+)/(\w+)(?:/kernel)?", name)
  if match and match[3] in _SUBLAYERS:
    stack, block, child, leaf = match[1], int(match[2]), match[3], match[4]
    encoder_sublayer, decoder_sublayer, module = _SUBLAYERS[child]
    sublayer = encoder_sublayer if stack == "encoder" else decoder_sublayer
    if sublayer is not None:
      weight = None if module == "layer_norm" else _QKVO.get(leaf, leaf)
      return ModulePath(stack, block, sublayer, module, weight)
  raise KeyError(f"{name!r} is not a parameter of t5rank's T5 network")


def tensor_names(config: T5Config,
                 rename: Callable[[str], tuple[str, bool]]) -> dict[str, tuple[str, bool]]:
  """t5rank name -> (name in another format, whether that format stores it transposed)."""
  return {name: rename(name) for name in param_shapes(config)}


def check_params(params: Mapping[str, Any], config: T5Config, source: str) -> dict[str, np.ndarray]:
  """`params` flattened to float32 numpy arrays, after checking them against `config`."""
  flat = flatten(params)
  names = {name: (name, False) for name in param_shapes(config)}
  shapes = {name: tuple(np.shape(value)) for name, value in flat.items()}
  return flatten(import_tensors(source, shapes, lambda name: flat[name], names, config))


def import_tensors(source: str, shapes: Mapping[str, Shape], read: Callable[[str], Any],
                   names: Mapping[str, tuple[str, bool]], config: T5Config,
                   ignore: Callable[[str], bool] = lambda name: False) -> Params:
  """t5rank parameters read from a foreign set of named tensors.

  `shapes` lists every tensor the source holds; `read(name)` returns one as an array; `names` maps
  each t5rank name to the source's name and whether the source stores it transposed. Missing,
  misshaped and unexpected tensors (other than those `ignore` accepts, e.g. optimizer slots) are
  all reported in one `CheckpointError` before anything is read. Values become float32.
  """
  ours = param_shapes(config)
  expected = {theirs: ours[name][::-1] if transpose else ours[name]
              for name, (theirs, transpose) in names.items()}
  missing = [f"{n!r} (expected shape {s})" for n, s in expected.items() if n not in shapes]
  misshaped = [f"{n!r}: expected shape {s}, got {_shape(shapes[n])}" for n, s in expected.items()
               if n in shapes and tuple(shapes[n]) != s]
  # names and shapes from the file: escaped and bounded
  unexpected = [f"{quote(n)} {_shape(shapes[n])}" for n in sorted(shapes)
                if n not in expected and not ignore(n)]
  problems = [(kind, items) for kind, items in
              (("missing", missing), ("misshaped", misshaped), ("unexpected", unexpected)) if items]
  if problems:
    lines = [f"{source}: tensors do not match the T5 config {_describe(config)}:"]
    for kind, items in problems:
      more = [f"... and {len(items) - MAX_LISTED} more"] if len(items) > MAX_LISTED else []
      lines.append(f"  {len(items)} {kind} tensor(s): " + "; ".join(items[:MAX_LISTED] + more))
    raise CheckpointError("\n".join(lines))
  flat = {}
  for name, (theirs, transpose) in names.items():
    value = np.asarray(read(theirs)).astype(np.float32)
    flat[name] = np.ascontiguousarray(value.T) if transpose else value
  return unflatten(flat)


def _shape(shape: Any) -> str:
  """A shape as a file states it, printed as a tuple when short, else through `quote`."""
  shape = tuple(shape)
  if len(shape) <= 4 and all(isinstance(d, int) and 0 <= d < 10**12 for d in shape):
    return str(shape)
  return quote(shape)


def export_tensors(params: Mapping[str, Any], config: T5Config,
                   rename: Callable[[str], tuple[str, bool]]) -> dict[str, np.ndarray]:
  """t5rank parameters (checked against `config`) as {name in another format: float32 array}."""
  flat = check_params(params, config, "the parameters to export")
  out = {}
  for name, (theirs, transpose) in tensor_names(config, rename).items():
    out[theirs] = np.ascontiguousarray(flat[name].T) if transpose else flat[name]
  return out


@dataclasses.dataclass(frozen=True)
class Probes:
  """Names, in one format, of the tensors whose shapes reveal a T5 architecture."""
  embedding: str  # (V, D)
  query: str  # encoder block 0 query, (D, H*K)
  relpos: str  # encoder relative position bias, (H, buckets)
  wi: str  # encoder block 0 relu input kernel, (D, F)
  wi_0: str  # encoder block 0 gated-gelu first input kernel, (D, F)
  logits: str  # untied output projection
  block: str  # regex with groups (stack, block index)


def infer_architecture(shapes: Mapping[str, Shape], probes: Probes) -> dict[str, Any]:
  """The T5Config fields that the tensor shapes of a config-less checkpoint fix."""
  fields: dict[str, Any] = {}
  if probes.embedding in shapes:
    fields["vocab_size"], fields["d_model"] = shapes[probes.embedding]
  if probes.relpos in shapes:
    fields["num_heads"], fields["relative_attention_num_buckets"] = shapes[probes.relpos]
    if probes.query in shapes:
      fields["d_kv"] = shapes[probes.query][1] // fields["num_heads"]
  for feed_forward, probe in (("relu", probes.wi), ("gated-gelu", probes.wi_0)):
    if probe in shapes:
      fields["feed_forward"], fields["d_ff"] = feed_forward, shapes[probe][1]
  fields["tie_embeddings"] = probes.logits not in shapes
  for stack in ("encoder", "decoder"):
    blocks = {int(m[2]) for n in shapes for m in [re.fullmatch(probes.block, n)]
              if m and m[1] == stack}
    fields[f"num_{stack}_layers"] = max(blocks) + 1 if blocks else 0
  return fields


def resolve_config(source: str, inferred: Mapping[str, Any],
                   config: Optional[T5Config]) -> T5Config:
  """`config` after checking it against the fields `infer_architecture` read from `source`.

  Raises CheckpointError when `config` is None (naming the built-in configs that fit) or disagrees.
  """
  if config is None:
    fits = [name for name, c in CONFIGS.items()
            if all(getattr(c, k) == v for k, v in inferred.items())]
    hint = (f"built-in configs that fit: {', '.join(fits)}" if fits
            else "no built-in config fits; build a T5Config with these fields")
    raise CheckpointError(f"{source} carries no T5 config; pass one (`--config NAME` or "
                          f"`config=`). Its tensor shapes give {dict(inferred)}; {hint}")
  wrong = [f"{k}={getattr(config, k)!r} but the checkpoint has {v!r}"
           for k, v in inferred.items() if getattr(config, k) != v]
  if wrong:
    raise CheckpointError(f"{source} does not fit the given T5 config: " + "; ".join(wrong))
  return config


def check_same_architecture(source: str, stored: T5Config, given: T5Config) -> None:
  """Raises CheckpointError when `given` differs from the config stored with a checkpoint."""
  wrong = [f"{k}: given {getattr(given, k)!r}, checkpoint {getattr(stored, k)!r}"
           for k in ARCHITECTURE_FIELDS if getattr(given, k) != getattr(stored, k)]
  if wrong:
    raise CheckpointError(f"the given T5 config does not match the one stored with {source}: "
                          + "; ".join(wrong))


def _describe(config: T5Config) -> str:
  return (f"(d_model={config.d_model}, layers={config.num_encoder_layers}+"
          f"{config.num_decoder_layers}, heads={config.num_heads}x{config.d_kv}, "
          f"d_ff={config.d_ff}, {config.feed_forward}, "
          f"{'tied' if config.tie_embeddings else 'untied'}"
          f"{', scaled' if config.scale_decoder_outputs else ''}, vocab={config.vocab_size})")
