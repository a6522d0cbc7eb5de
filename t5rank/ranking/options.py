"""The scoring options, each declared once: its name, type, check, default and help. `t5rank score`
and `t5rank rerank` (a corpus of documents) and `t5rank serve` (a service) build their flags from
here, and `t5rank.load` (with the PyTerrier transformer, which passes its options on) takes its
defaults from here, so that one checkpoint scores one text alike everywhere given the same options.

One default differs by use, on purpose, and every `--help` and docstring says so: `window`, the
sentences per window of a long text, is 10 for a corpus of documents (the monoT5 paper's MaxP over
windows of 10 sentences, stride 5) and 0 for a service and the Python front door (each text scored
whole, cut at max_length: what a RAG stack sends are passages).

    add_arguments(parser, "corpus")     # t5rank score's flags
    default("window", "service")        # 0
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable, Optional, Union

from t5rank.models import registry
from t5rank.models.inputs import TRUNCATIONS
from t5rank.ranking.passages import AGGREGATIONS, DOCUMENT_STRIDE, DOCUMENT_WINDOW
from t5rank.ranking.duo_pairs import AGGREGATIONS as PAIR_AGGREGATIONS

USES = ("corpus", "service")
USE_NAMES = {"corpus": "t5rank score", "service": "t5rank serve, t5rank.load and PyTerrier"}
PRECISIONS = ("float32", "tensorfloat32", "bfloat16")


def _int_at_least(minimum: int, what: str) -> Callable[[str], int]:
  def parse(text: str) -> int:
    try:
      value = int(text)
    except ValueError:
      raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < minimum:
      raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value
  return parse


positive_int = _int_at_least(1, "a positive integer")  # argparse types that check
non_negative_int = _int_at_least(0, "an integer >= 0")


def mesh_shape(text: str) -> tuple[int, int]:
  """`--mesh`: `DATA,MODEL`, positive sizes or one -1."""
  try:
    data, model = (int(x) for x in text.split(","))
  except ValueError:
    raise argparse.ArgumentTypeError(
        f"expected DATA,MODEL (e.g. 2,4 or -1,1), got {text!r}") from None
  if data == 0 or model == 0 or data < -1 or model < -1 or (data, model) == (-1, -1):
    raise argparse.ArgumentTypeError(f"expected positive sizes or one -1, got {text!r}")
  return data, model


@dataclasses.dataclass(frozen=True)
class Option:
  """One scoring option: `name` (the keyword of `t5rank.load`; the flag is --name-with-dashes),
  `help`, `type` (an argparse type that also checks), `default` (one value, or {use: value}
  where it differs by use on purpose), `choices`, `metavar`, `boolean` (--flag/--no-flag)."""
  name: str
  help: str
  type: Optional[Callable[[str], Any]] = None
  default: Union[Any, dict] = None
  choices: Optional[Union[tuple, Callable[[], Any]]] = None
  metavar: Optional[str] = None
  boolean: bool = False

  @property
  def flag(self) -> str:
    return "--" + self.name.replace("_", "-")

  def default_for(self, use: str) -> Any:
    if use not in USES:
      raise ValueError(f"unknown use {use!r}; one of {USES}")
    return self.default[use] if isinstance(self.default, dict) else self.default

  def help_for(self, use: str) -> str:
    """The help, with the default of `use` (and the other use's, where they differ)."""
    if isinstance(self.default, dict):
      others = ", ".join(f"{value} for {USE_NAMES[other]}" for other, value in self.default.items()
                         if other != use)
      return f"{self.help} (default: {self.default[use]} here; {others})"
    return self.help if self.default is None else f"{self.help} (default: {self.default})"


OPTIONS = (
    Option("reranker", "what the checkpoint is when its files do not say, one of %(choices)s (a "
           "Hugging Face duoT5: --reranker duot5; default: its metadata's model, else monot5)",
           choices=registry.Families, metavar="FAMILY"),
    Option("config", "model config name (see t5rank.models.config), for checkpoints without one "
           "(Mesh TF, t5x)"),
    Option("dtype", "float32 or bfloat16: bfloat16 stores the weight matrices in bfloat16 and "
           "makes every matrix product bfloat16 operands with float32 results (mixed precision: "
           "the T5 families and TK; the word dual encoder, which multiplies no weight matrix, "
           "refuses it; on a CPU it pays with avx512_bf16 or amx_bf16, and is emulated, slower, "
           "without: the command says so; default: float32, the reference)",
           choices=("float32", "bfloat16")),
    Option("precision", "float32 matrix products on a GPU or TPU: float32 (full float32), "
           "tensorfloat32 (TF32 on an NVIDIA GPU: faster, about 3 decimal digits) or bfloat16 "
           "(default: bfloat16 with --dtype bfloat16, else float32). Refused on a CPU, which "
           "computes float32 products in float32 whatever is asked", choices=PRECISIONS),
    Option("batch_tokens", "padded tokens per batch, over all local devices (default: 2048 per "
           "CPU device for a T5 of T5-small's width or wider, 512 // d_model times that for a "
           "narrower one (16384 for the demo's T5s); 131072 per GPU, 16384 per TPU core; per "
           "data-parallel group of --mesh)",
           type=positive_int),
    Option("length_bucket", "pad lengths to multiples of N: fewer shapes to compile (worth it on a "
           "GPU or TPU, where each compilation takes seconds), more padding (default: the "
           "model's own, 64 tokens for monoT5, 32 words for TK, 64 ids for the dual "
           "encoders)", type=positive_int, metavar="N"),
    Option("window", "sentences per window of a long text, whose score is then its windows' "
           "(--passages), 0 for whole texts cut at --max-length",
           type=non_negative_int, default={"corpus": DOCUMENT_WINDOW, "service": 0}),
    Option("stride", "sentences between window starts", type=positive_int,
           default=DOCUMENT_STRIDE),
    Option("passages", "how window scores make a text's score", choices=AGGREGATIONS,
           default="maxp"),
    Option("language", "the language of the sentence splitter that cuts texts into windows (an "
           "ISO code, e.g. en, zh)", default="en", metavar="CODE"),
    Option("depth", "rerank only each query's top K candidates (by the incoming ranking); the "
           "rest stay below them in that order (duoT5's K; default: all)", type=positive_int,
           metavar="K"),
    Option("aggregate", "a pairwise reranker's (duoT5) score of a candidate from its pairs with "
           "the others of the top K", choices=PAIR_AGGREGATIONS, default="sym-sum"),
    Option("targets", "target words: a name such as true_false, or positive,negative (default: "
           "the checkpoint's metadata.json `target_words`, else true_false)"),
    Option("vocab", "vocabulary: a name (t5, insuranceqa_en_8k) or a SentencePiece model (default: "
           "the one the checkpoint's metadata.json names, else T5's)"),
    Option("max_length", "input tokens, at most (default: the checkpoint's training input length "
           "from its metadata.json, else 512)", type=positive_int),
    Option("truncation", "past --max-length, cut the document (`document`: the query and "
           "`Relevant:` always read) or the whole input at its end (`input`), as pygaggle and "
           "transformers' T5 tokenizer do (monoT5, duoT5, the classifier; default: document)",
           choices=TRUNCATIONS),
    Option("bm25_in_input", "write each candidate's first-stage (BM25) score into the input, "
           "`Query: q BM25: 12 Document: d Relevant:` (default: as the checkpoint's metadata.json "
           "says; see t5rank.data.bm25_input)", boolean=True),
    Option("mesh", "device mesh over this host's devices, as in training: parameters are split "
           "over MODEL by the trainer's logical-axis rules, batches over DATA; -1 = all the "
           "remaining devices", type=mesh_shape, default=(-1, 1), metavar="DATA,MODEL"),
)
BY_NAME = {option.name: option for option in OPTIONS}


def default(name: str, use: str) -> Any:
  """The default of option `name` for `use` ("corpus" or "service")."""
  return BY_NAME[name].default_for(use)


def add_arguments(parser, use: str, names: Optional[tuple[str, ...]] = None) -> None:
  """Adds the flags of `names` (default: every option) to `parser` (or an argument group), with
  the defaults of `use`."""
  for name in names or BY_NAME:
    option = BY_NAME[name]
    kwargs: dict[str, Any] = {"help": option.help_for(use)}
    if option.boolean:
      kwargs.update(action=argparse.BooleanOptionalAction, default=None)
    else:
      kwargs["default"] = option.default_for(use)
      if option.type is not None:
        kwargs["type"] = option.type
      if option.choices is not None:
        kwargs["choices"] = option.choices() if callable(option.choices) else option.choices
    if option.metavar:
      kwargs["metavar"] = option.metavar
    parser.add_argument(option.flag, **kwargs)


def check(name: str, value: Any) -> Any:
  """`value` of option `name` as a Python caller gives it, checked as the flag checks its text
  (ValueError with one line); None stays None (the option's default applies)."""
  option = BY_NAME[name]
  if value is None:
    return None
  if option.choices is not None:
    choices = option.choices() if callable(option.choices) else option.choices
    if value not in choices:
      raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")
  if option.type in (positive_int, non_negative_int):
    if not isinstance(value, int) or isinstance(value, bool):
      raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
      option.type(str(value))
    except argparse.ArgumentTypeError as e:
      raise ValueError(f"{name}: {e}") from None
  return value
