"""T5 architecture configurations: the published sizes of T5 v1.0, T5 v1.1 and mT5, and a tiny one.

A `T5Config` holds architecture only (no training recipe). It round-trips through JSON so that every
checkpoint t5rank writes carries the exact network it belongs to.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, ClassVar, Optional

T5_VOCAB_SIZE = 32128  # 32,000 SentencePiece pieces + 100 extra ids, padded to a multiple of 128.
MT5_VOCAB_SIZE = 250112


class JsonConfig:
  """`replace`, `to_json` and `from_json` of a frozen dataclass config: the JSON object of its fields
  (a nested config as its own object, keys sorted), with `model` = MODEL when the class sets one
  (the model a checkpoint's config.json describes); unknown fields, and values not of their field's
  type (`"d_model": "sixty-four"`), are refused on the way back with a one-line ValueError."""
  MODEL: ClassVar[Optional[str]] = None

  def replace(self, **changes: Any):
    """A copy with `changes` applied."""
    return dataclasses.replace(self, **changes)

  def to_json(self) -> str:
    fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
    fields = {k: json.loads(v.to_json()) if isinstance(v, JsonConfig) else
              (dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v)
              for k, v in fields.items()}
    if self.MODEL is not None:
      fields["model"] = self.MODEL
    return json.dumps(fields, indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text: str):
    """The config of `to_json`'s text; ValueError (one line) for what a config cannot hold."""
    return cls._from_fields(json.loads(text))

  @classmethod
  def _from_fields(cls, fields: Any):
    if not isinstance(fields, dict):
      raise ValueError(f"a {cls.__name__} is a JSON object, not {type(fields).__name__}")
    fields = dict(fields)
    fields.pop("model", None)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
      raise ValueError(f"unknown {cls.__name__} fields {unknown}; known fields are {sorted(known)}")
    hints = typing.get_type_hints(cls)
    for name, value in fields.items():
      hint = hints[name]
      if isinstance(hint, type) and issubclass(hint, JsonConfig) and isinstance(value, dict):
        fields[name] = hint._from_fields(value)
      elif not _is_json_of(value, hint):
        raise ValueError(f"{cls.__name__}.{name} must be {_describe(hint)}, got {value!r}")
    return cls(**fields)


def _is_json_of(value: Any, hint: Any) -> bool:
  """Whether the JSON value `value` fits the annotation `hint` (Any and unknown forms fit)."""
  origin, args = typing.get_origin(hint), typing.get_args(hint)
  if hint is int:
    return isinstance(value, int) and not isinstance(value, bool)
  if hint is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if hint in (bool, str):
    return isinstance(value, hint)
  if origin is typing.Union:  # Optional[X]
    return any(_is_json_of(value, arg) for arg in args)
  if hint is type(None):
    return value is None
  if origin is tuple and len(args) == 2 and args[1] is Ellipsis:  # tuple[X, ...]
    return isinstance(value, (list, tuple)) and all(_is_json_of(v, args[0]) for v in value)
  if isinstance(hint, type) and issubclass(hint, JsonConfig):
    return isinstance(value, hint)
  return True


def _describe(hint: Any) -> str:
  """`hint` in words: "an integer", "a number or null"."""
  origin, args = typing.get_origin(hint), typing.get_args(hint)
  if origin is typing.Union:
    return " or ".join(_describe(arg) for arg in args)
  if origin is tuple:
    return f"a list of {_describe(args[0]).split(' ', 1)[1]}s"
  return {int: "an integer", float: "a number", bool: "true or false", str: "a string",
          type(None): "null"}.get(hint, f"a {getattr(hint, '__name__', hint)} object")


@dataclasses.dataclass(frozen=True)
class T5Config(JsonConfig):
  """Architecture of a T5 encoder-decoder.

  `feed_forward` is "relu" (T5 v1.0: wi -> relu -> wo) or "gated-gelu" (T5 v1.1 and mT5:
  gelu(wi_0) * wi_1 -> wo). Two separate facts about the output layer: `tie_embeddings` makes the
  input embedding the output projection (no `logits_dense` kernel), and `scale_decoder_outputs`
  multiplies the decoder output by d_model**-0.5 before it. T5 v1.0 does both; T5 v1.1 and mT5
  neither. `scale_decoder_outputs` left as None takes the value of `tie_embeddings` (what every
  config written before the two were separated means; transformers 4.x couples them the same way,
  transformers 5.x writes them apart as `tie_word_embeddings` and `scale_decoder_outputs`).
  """

  vocab_size: int = T5_VOCAB_SIZE
  d_model: int = 512
  num_heads: int = 8
  d_kv: int = 64
  d_ff: int = 2048
  num_encoder_layers: int = 6
  num_decoder_layers: int = 6
  feed_forward: str = "relu"
  tie_embeddings: bool = True
  scale_decoder_outputs: Optional[bool] = None
  relative_attention_num_buckets: int = 32
  relative_attention_max_distance: int = 128
  dropout_rate: float = 0.1
  layer_norm_epsilon: float = 1e-6
  dtype: str = "float32"  # activations; parameters are always float32.

  def __post_init__(self):
    for name in ("vocab_size", "d_model", "num_heads", "d_kv", "d_ff",
                 "relative_attention_num_buckets", "relative_attention_max_distance"):
      if getattr(self, name) < 1:
        raise ValueError(f"T5Config.{name} must be positive, got {getattr(self, name)}")
    if self.num_encoder_layers < 0 or self.num_decoder_layers < 0:
      raise ValueError("T5Config's num_encoder_layers and num_decoder_layers must be >= 0, got "
                       f"{self.num_encoder_layers} and {self.num_decoder_layers}")
    if self.feed_forward not in ("relu", "gated-gelu"):
      raise ValueError(f"feed_forward must be 'relu' or 'gated-gelu', got {self.feed_forward!r}")
    if self.dtype not in ("float32", "bfloat16"):
      raise ValueError(f"dtype must be 'float32' or 'bfloat16', got {self.dtype!r}")
    if self.scale_decoder_outputs is None:
      object.__setattr__(self, "scale_decoder_outputs", self.tie_embeddings)

  def replace(self, **changes: Any) -> "T5Config":
    """Returns a copy with `changes` applied (e.g. `dtype="bfloat16"`, `dropout_rate=0.0`). Changing
    `tie_embeddings` alone moves `scale_decoder_outputs` with it when the two were equal (the
    coupling T5 v1.0 and v1.1 share); give both to set them apart."""
    if ("tie_embeddings" in changes and "scale_decoder_outputs" not in changes
        and self.scale_decoder_outputs == self.tie_embeddings):
      changes["scale_decoder_outputs"] = changes["tie_embeddings"]
    return dataclasses.replace(self, **changes)

  @property
  def num_parameters(self) -> int:
    """Number of parameters of the network this config describes."""
    d, h = self.d_model, self.num_heads * self.d_kv
    attention = 4 * d * h
    ff = d * self.d_ff * (3 if self.feed_forward == "gated-gelu" else 2)
    relpos = 2 * self.num_heads * self.relative_attention_num_buckets
    encoder = self.num_encoder_layers * (attention + ff + 2 * d) + d
    decoder = self.num_decoder_layers * (2 * attention + ff + 3 * d) + d
    logits = 0 if self.tie_embeddings else d * self.vocab_size
    return self.vocab_size * d + encoder + decoder + logits + relpos


def _v1_0(d_model, d_ff, num_heads, d_kv, num_layers) -> T5Config:
  return T5Config(d_model=d_model, d_ff=d_ff, num_heads=num_heads, d_kv=d_kv,
                  num_encoder_layers=num_layers, num_decoder_layers=num_layers,
                  feed_forward="relu", tie_embeddings=True)


def _v1_1(d_model, d_ff, num_heads, num_layers, vocab_size=T5_VOCAB_SIZE) -> T5Config:
  return T5Config(d_model=d_model, d_ff=d_ff, num_heads=num_heads, d_kv=64,
                  num_encoder_layers=num_layers, num_decoder_layers=num_layers,
                  feed_forward="gated-gelu", tie_embeddings=False, vocab_size=vocab_size)


# Sizes as released: T5 v1.0 (Raffel et al. 2020; the monoT5 paper), T5 v1.1 and mT5 (Xue et al. 2021).
CONFIGS: dict[str, T5Config] = {
    "t5_small": _v1_0(512, 2048, 8, 64, 6),
    "t5_base": _v1_0(768, 3072, 12, 64, 12),
    "t5_large": _v1_0(1024, 4096, 16, 64, 24),
    "t5_3B": _v1_0(1024, 16384, 32, 128, 24),
    "t5_11B": _v1_0(1024, 65536, 128, 128, 24),
    "t5_1_1_small": _v1_1(512, 1024, 6, 8),
    "t5_1_1_base": _v1_1(768, 2048, 12, 12),
    "t5_1_1_large": _v1_1(1024, 2816, 16, 24),
    "t5_1_1_xl": _v1_1(2048, 5120, 32, 24),
    "t5_1_1_xxl": _v1_1(4096, 10240, 64, 24),
    "mt5_small": _v1_1(512, 1024, 6, 8, MT5_VOCAB_SIZE),
    "mt5_base": _v1_1(768, 2048, 12, 12, MT5_VOCAB_SIZE),
    "mt5_large": _v1_1(1024, 2816, 16, 24, MT5_VOCAB_SIZE),
    "mt5_xl": _v1_1(2048, 5120, 32, 24, MT5_VOCAB_SIZE),
    "mt5_xxl": _v1_1(4096, 10240, 64, 24, MT5_VOCAB_SIZE),
    # For CPU tests and demos: T5 v1.0 layout, 2+2 layers.
    "tiny": T5Config(d_model=128, d_ff=512, num_heads=4, d_kv=32, num_encoder_layers=2,
                     num_decoder_layers=2, feed_forward="relu", tie_embeddings=True),
}


def get_config(name: str, **overrides: Any) -> T5Config:
  """Returns the named configuration (see `CONFIGS`), with `overrides` applied."""
  if name not in CONFIGS:
    raise ValueError(f"unknown model config {name!r}; choose one of {sorted(CONFIGS)}")
  return CONFIGS[name].replace(**overrides)
