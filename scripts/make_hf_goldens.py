"""Builds the reference outputs that tests/test_hf_numerics.py checks t5rank against.

    .venv/bin/pip install -e '.[reference]'   # torch (CPU) + transformers 4.57.1; CI needs neither
    .venv/bin/python scripts/make_hf_goldens.py   # about 10 s; rewrites tests/golden/hf_*
    # with transformers 5.x installed instead (pip install 'transformers==5.23.0'), the same command
    # writes tests/golden/hf5_* and hf5_goldens.json and leaves the 4.x files alone

For a tiny random T5 v1.0 (relu, tied) and T5 v1.1 (gated-gelu, untied) it writes, with Hugging Face
transformers' PyTorch T5 in float32:
  tests/golden/hf_{name}/config.json, model.safetensors   the checkpoint (save_pretrained)
  tests/golden/hf_{name}/reference.npz
      input_ids (B, L), attention_mask (B, L)   a padded batch; one row longer than 128 tokens, so
                                                that the far relative position buckets are used
      decoder_input_ids (B, T)                  start id 0, then random ids (teacher forcing)
      logits (B, T, V)                          full logits of every decoder step
      log_p_true, p_true (B,)                   the monoT5 score: softmax over the logits of
                                                1176 (true) / 6136 (false) at step 0
  tests/golden/relative_position_buckets.npz   HF's bucket of every relative position -600..600,
                                                bidirectional and causal, for two bucket settings
  tests/golden/hf_goldens.json                 versions and settings used
  tests/golden/hf_duot5/                        a tiny T5 with T5's vocabulary and duoT5's
                                                reference: three pairs' ids and pygaggle's p
  tests/golden/hf_truncation.json               monoT5 inputs past 512 tokens as pygaggle makes
                                                them (transformers' T5 tokenizer, truncation=True,
                                                max_length=512) and hf_duot5's log P(true) of them
                                                (`make_hf_goldens.py truncation` writes only it)
  tests/golden/hf_rankt5/                       a tiny T5 v1.0 with T5's vocabulary in the files of
                                                the Hub's RankT5 uploads (pytorch_model.bin)
                                                and reference.json: four pairs' ids and the logit
                                                of <extra_id_10> (32089) at the first decoder step
                                                (`make_hf_goldens.py rankt5` writes only it)
It then checks the other direction: t5rank's import and re-export of each checkpoint loads in
transformers and gives the same logits, bit for bit (with transformers 5.x, in both config forms
t5rank writes: 4.x and 5.x).

transformers 5.x saves T5 configs in another form (`tie_word_embeddings: true` always, a separate
`scale_decoder_outputs`, no `lm_head.weight` when tied; docs/checkpoints.md). Run with 5.x, the
script writes `hf5_{name}` directories and `hf5_goldens.json` (which records the version) beside
the 4.57.1 ones, so that the tests check t5rank against checkpoints as each generation saves them.
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np

os.environ.setdefault("USE_TF", "0")  # transformers would otherwise import TensorFlow too
import torch  # noqa: E402
import transformers  # noqa: E402

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), os.pardir, "tests", "golden")
TARGET_IDS = (1176, 6136)  # ▁true, ▁false in the T5 vocabulary
VOCAB_SIZE = 6144  # must hold the target ids; small to keep the committed files small
ROW_LENGTHS = (200, 37, 5)  # the longest row is the padded length
DECODER_STEPS = 4
RELATIVE_RANGE = 600
BUCKET_SETTINGS = ((32, 128), (64, 256))  # (num_buckets, max_distance)

MODELS = {
    "v1_0": dict(feed_forward_proj="relu", tie_word_embeddings=True, num_layers=2,
                 num_decoder_layers=2),
    "v1_1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False, num_layers=2,
                 num_decoder_layers=3),
}
# transformers 5.x ties the head of every T5 it builds (tie_word_embeddings is forced true; its "v1.1"
# is tied and unscaled). An untied head exists only in a file that has `lm_head.weight`, as when 5.x
# loads a 4.x v1.1/mT5 and saves it again: "v1_1_untied" unties the head of a 5.x-built v1.1 first.
UNTIED_5X = "v1_1_untied"
# transformers 5.x's mT5 is another class with no `scale_decoder_outputs` at all: its head is the
# shared embedding unless the file has `lm_head.weight`, and never scaled, while its config.json
# says `tie_word_embeddings: true` as a 4.x scaled T5 v1.0 would. "mt5" is one 5.x builds,
# "mt5_untied" one with a head of its own (a 4.x mT5 loaded and saved by 5.x).
MT5_5X = {"mt5": False, "mt5_untied": True}


def build_model(seed: int, untie: bool = False, mt5: bool = False,
                **overrides) -> transformers.T5ForConditionalGeneration:
  """A tiny random T5 whose layer norms and relative position biases are far from their initial
  values (ones, near zeros), so that a wrongly mapped tensor changes the outputs. An untied output
  layer is scaled by d_model**-0.5 (as the tied one is) to keep logits, and P(true), away from
  saturation."""
  torch.manual_seed(seed)
  config = (transformers.MT5Config if mt5 else transformers.T5Config)(
      vocab_size=VOCAB_SIZE, d_model=32, d_kv=8, d_ff=48, num_heads=4,
      relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.0,
      layer_norm_epsilon=1e-6, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
      **overrides)
  model_class = (transformers.MT5ForConditionalGeneration if mt5
                 else transformers.T5ForConditionalGeneration)
  model = model_class(config).eval()
  if untie:  # a head of its own, as a 4.x v1.1 checkpoint loaded and saved by 5.x has
    model.lm_head.weight = torch.nn.Parameter(torch.randn_like(model.shared.weight))
  _perturb(model)
  if "lm_head.weight" in dict(model.named_parameters()):  # untied
    with torch.no_grad():
      model.lm_head.weight.mul_(config.d_model ** -0.5)
  return model


def _perturb(model):
  """Layer norms away from one and relative-position biases away from zero, in place, so that
  a golden checks them too."""
  with torch.no_grad():
    for name, param in model.named_parameters():
      if "layer_norm" in name:
        param.copy_(1.0 + 0.3 * torch.randn_like(param))
      elif "relative_attention_bias" in name:
        param.copy_(torch.randn_like(param))


def make_inputs(seed: int) -> dict[str, np.ndarray]:
  """A padded batch of random ids (3..VOCAB_SIZE, EOS last) and decoder inputs from start id 0."""
  rng = np.random.default_rng(seed)
  length = max(ROW_LENGTHS)
  input_ids = np.zeros((len(ROW_LENGTHS), length), np.int32)
  for row, n in enumerate(ROW_LENGTHS):
    input_ids[row, :n - 1] = rng.integers(3, VOCAB_SIZE, n - 1)
    input_ids[row, n - 1] = 1
  decoder_input_ids = rng.integers(3, VOCAB_SIZE, (len(ROW_LENGTHS), DECODER_STEPS))
  decoder_input_ids = decoder_input_ids.astype(np.int32)
  decoder_input_ids[:, 0] = 0
  return {"input_ids": input_ids, "attention_mask": (input_ids > 0).astype(np.int32),
          "decoder_input_ids": decoder_input_ids}


def reference_outputs(model, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """Full logits of every decoder step and the monoT5 score of each row."""
  with torch.no_grad():
    logits = model(input_ids=torch.from_numpy(inputs["input_ids"]).long(),
                   attention_mask=torch.from_numpy(inputs["attention_mask"]).long(),
                   decoder_input_ids=torch.from_numpy(inputs["decoder_input_ids"]).long()).logits
  logits = logits.numpy().astype(np.float32)  # (B, T, V)
  two = torch.from_numpy(logits[:, 0, list(TARGET_IDS)])  # (B, 2)
  log_p = torch.log_softmax(two, dim=-1)[:, 0].numpy()
  return {"logits": logits, "log_p_true": log_p, "p_true": np.exp(log_p)}


def bucket_tables() -> dict[str, np.ndarray]:
  """HF's bucket of every relative position -RELATIVE_RANGE..RELATIVE_RANGE."""
  bucket = transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket
  relative = torch.arange(-RELATIVE_RANGE, RELATIVE_RANGE + 1)
  tables = {"relative_position": relative.numpy()}
  for num_buckets, max_distance in BUCKET_SETTINGS:
    for bidirectional in (True, False):
      key = f"{'bidirectional' if bidirectional else 'causal'}_{num_buckets}_{max_distance}"
      tables[key] = bucket(relative, bidirectional=bidirectional, num_buckets=num_buckets,
                           max_distance=max_distance).numpy()
  return tables


def check_t5rank_export(directory: str, inputs: dict[str, np.ndarray],
                        reference: dict[str, np.ndarray], tmp_dir: str,
                        generation: str = "4") -> None:
  """Raises unless t5rank's HF import + export (config form of `generation`) of `directory`
  reproduces `reference` in torch."""
  from t5rank.models.t5_weights import load_checkpoint
  from t5rank.models.t5_weights.hf import save_hf_checkpoint

  config, params = load_checkpoint(directory)
  if generation == "4" and config.tie_embeddings != config.scale_decoder_outputs:
    return  # no 4.x form exists (t5rank refuses to write one; tests/test_hf_generations.py)
  save_hf_checkpoint(tmp_dir, params, config, generation=generation)
  model = transformers.T5ForConditionalGeneration.from_pretrained(tmp_dir).eval()
  logits = reference_outputs(model, inputs)["logits"]
  if not np.array_equal(logits, reference["logits"]):
    raise AssertionError(f"{directory}: t5rank's export ({generation}.x form) differs by "
                         f"{np.abs(logits - reference['logits']).max()}")


# duoT5 as pygaggle scores it (`DuoT5.rescore`): the T5 vocabulary's ids of "Query: q Document0: d0
# Document1: d1 Relevant:" + EOS, p = softmax over the logits of false (6136) and true (1176) at
# the first decoder step, its true entry. A tiny T5 v1.0 with T5's whole vocabulary (32,128 ids).
DUO_PAIRS = [("what does life insurance cover", "It pays a death benefit to your family.",
              "Car insurance covers accidents."),
             ("what does life insurance cover", "Car insurance covers accidents.",
              "It pays a death benefit to your family."),
             ("is my deductible per claim", "Yes, you pay the deductible each time you claim.",
              "Annuities pay an income for life.")]


def write_duot5_golden() -> None:
  """tests/golden/hf_duot5/: the checkpoint, and reference.json with each pair's texts, ids and
  pygaggle's p(document0 more relevant)."""
  import sentencepiece

  torch.manual_seed(7)
  config = transformers.T5Config(vocab_size=32128, d_model=32, d_kv=8, d_ff=48, num_heads=4,
                                 num_layers=2, dropout_rate=0.0, feed_forward_proj="relu",
                                 tie_word_embeddings=True, pad_token_id=0, eos_token_id=1,
                                 decoder_start_token_id=0)
  model = transformers.T5ForConditionalGeneration(config).eval()
  _perturb(model)
  spiece = sentencepiece.SentencePieceProcessor(
      model_file=os.path.join(os.path.dirname(__file__), os.pardir, "t5rank", "data",
                              "t5_spiece.model"))
  rows = []
  for query, first, second in DUO_PAIRS:
    text = f"Query: {query} Document0: {first} Document1: {second} Relevant:"
    ids = spiece.encode(text) + [1]
    with torch.no_grad():
      logits = model(input_ids=torch.tensor([ids]),
                     decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, 0]
    p = torch.softmax(logits[[6136, 1176]], dim=0)[1].item()
    rows.append({"query": query, "document0": first, "document1": second, "ids": ids, "p": p})
  directory = os.path.join(GOLDEN_DIR, "hf_duot5")
  model.save_pretrained(directory, safe_serialization=True)
  with open(os.path.join(directory, "reference.json"), "w") as f:
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "pairs": rows}, f, indent=1)
    f.write("\n")


# RankT5 in the files of its uploads to the Hugging Face Hub (Soyoung97/RankT5-base, -large, -3b:
# transformers T5 files, config.json and pytorch_model.bin), scored as Google's RankT5 is: the input
# "Query: q Document: d" without EOS (google/rax examples/t5x/tasks.py), the score the logit of
# <extra_id_10> (32089) at the first decoder step from start id 0
RANKT5_SCORE_ID = 32089
RANKT5_PAIRS = [("does car insurance cover theft", "Car insurance covers theft of the car."),
                ("does car insurance cover theft", "Life insurance pays a death benefit."),
                ("does car insurance cover theft", "Theft is not covered here."),
                ("is my deductible per claim", "Yes, you pay the deductible each time you claim.")]


def write_rankt5_golden() -> None:
  """tests/golden/hf_rankt5/: a tiny random T5 v1.0 with T5's vocabulary saved by transformers in
  the files of the Hub's RankT5 uploads (pytorch_model.bin, torch's zip), and reference.json with
  each pair's texts, ids and transformers' logit of 32089 at the first decoder step. d_model 8
  keeps the file at 1 MB (the embedding holds T5's 32,128 rows)."""
  import sentencepiece

  torch.manual_seed(11)
  config = transformers.T5Config(vocab_size=32128, d_model=8, d_kv=4, d_ff=16, num_heads=2,
                                 num_layers=2, num_decoder_layers=1, dropout_rate=0.0,
                                 feed_forward_proj="relu", tie_word_embeddings=True,
                                 pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
  model = transformers.T5ForConditionalGeneration(config).eval()
  _perturb(model)
  spm_path = os.path.join(os.path.dirname(__file__), os.pardir, "t5rank", "data", "t5_spiece.model")
  spiece = sentencepiece.SentencePieceProcessor(model_file=spm_path)
  tokenizer = transformers.T5Tokenizer(vocab_file=spm_path)  # its 100 extra ids follow the pieces
  assert tokenizer.convert_tokens_to_ids("<extra_id_10>") == RANKT5_SCORE_ID
  rows = []
  for query, document in RANKT5_PAIRS:
    ids = spiece.encode(f"Query: {query} Document: {document}")  # no EOS
    with torch.no_grad():
      logits = model(input_ids=torch.tensor([ids]),
                     decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, 0]
    rows.append({"query": query, "document": document, "ids": ids,
                 "score": logits[RANKT5_SCORE_ID].item()})
  directory = os.path.join(GOLDEN_DIR, "hf_rankt5")
  model.save_pretrained(directory, safe_serialization=False)
  with open(os.path.join(directory, "reference.json"), "w") as f:
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "score_id": RANKT5_SCORE_ID, "pairs": rows}, f, indent=1)
    f.write("\n")


# monoT5 past max_length as pygaggle scores it (`MonoT5.rescore`, `T5BatchTokenizer`): transformers'
# SentencePiece T5 tokenizer on "Query: q Document: d Relevant:" with truncation=True, max_length=512 (the first
# 511 ids, then EOS), then the network; a short document too, cut by neither.
TRUNCATION_QUERY = "what does life insurance cover"
TRUNCATION_SENTENCE = ("A term life policy pays a death benefit to your family if you die within "
                       "the term, whatever the cause. ")
TRUNCATION_DOCUMENTS = {"short": TRUNCATION_SENTENCE, "long": TRUNCATION_SENTENCE * 25}


def write_truncation_golden() -> None:
  """tests/golden/hf_truncation.json: for a short and a long (past 512 tokens) document, the ids
  transformers' T5 tokenizer gives pygaggle's monoT5 input and tests/golden/hf_duot5's log
  P(true) of them (softmax over the logits of true (1176) and false (6136) at the first decoder
  step)."""
  directory = os.path.join(GOLDEN_DIR, "hf_duot5")
  model = transformers.T5ForConditionalGeneration.from_pretrained(directory).eval()
  # pygaggle's tokenizer: AutoTokenizer.from_pretrained(..., use_fast=False), the SentencePiece
  # T5Tokenizer (the fast one converted here drops the "▁" before "Query:")
  tokenizer = transformers.T5Tokenizer(vocab_file=os.path.join(
      os.path.dirname(__file__), os.pardir, "t5rank", "data", "t5_spiece.model"))
  rows = {}
  for name, document in TRUNCATION_DOCUMENTS.items():
    text = f"Query: {TRUNCATION_QUERY} Document: {document.strip()} Relevant:"
    encoded = tokenizer([text], padding="longest", truncation=True, max_length=512,
                        return_tensors="pt")
    with torch.no_grad():
      logits = model(input_ids=encoded["input_ids"],
                     decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, 0]
    log_p = torch.log_softmax(logits[list(TARGET_IDS)], dim=0)[0].item()
    rows[name] = {"document": document.strip(),
                  "whole_input_tokens": len(tokenizer(text)["input_ids"]),
                  "ids": encoded["input_ids"][0].tolist(), "log_p_true": log_p}
  with open(os.path.join(GOLDEN_DIR, "hf_truncation.json"), "w") as f:
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "query": TRUNCATION_QUERY, "max_length": 512, "documents": rows}, f, indent=1)
    f.write("\n")


GENERATION = transformers.__version__.split(".")[0]  # "4" or "5"
PREFIX = "hf" if GENERATION == "4" else f"hf{GENERATION}"


def main(only: tuple[str, ...] = ()) -> None:
  torch.set_num_threads(1)
  os.makedirs(GOLDEN_DIR, exist_ok=True)
  if only == ("truncation",):  # hf_truncation.json alone, from the hf_duot5 already written
    write_truncation_golden()
    return
  if only == ("rankt5",):  # tests/golden/hf_rankt5 alone (4.x, as the other hf_* goldens)
    assert GENERATION == "4", "tests/golden/hf_rankt5 is written with transformers 4.x"
    write_rankt5_golden()
    return
  models = {name: (overrides, False, False) for name, overrides in MODELS.items()}
  if GENERATION != "4":
    models[UNTIED_5X] = (MODELS["v1_1"], True, False)
    models.update({name: (MODELS["v1_1"], untie, True) for name, untie in MT5_5X.items()})
  for seed, (name, (overrides, untie, mt5)) in enumerate(models.items()):
    model = build_model(seed, untie=untie, mt5=mt5, **overrides)
    directory = os.path.join(GOLDEN_DIR, f"{PREFIX}_{name}")
    model.save_pretrained(directory, safe_serialization=True)
    inputs = make_inputs(seed)
    reference = reference_outputs(model, inputs)
    np.savez_compressed(os.path.join(directory, "reference.npz"), **inputs, **reference)
    for generation in ("4", "5") if GENERATION != "4" else ("4",):
      with tempfile.TemporaryDirectory() as tmp_dir:
        check_t5rank_export(directory, inputs, reference, tmp_dir, generation)
  if GENERATION == "4":
    np.savez_compressed(os.path.join(GOLDEN_DIR, "relative_position_buckets.npz"),
                        **bucket_tables())
    write_duot5_golden()
    write_truncation_golden()
    write_rankt5_golden()
  with open(os.path.join(GOLDEN_DIR, f"{PREFIX}_goldens.json"), "w") as f:
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "models": {name: dict(overrides, untied_head=untie, mt5=mt5)
                          for name, (overrides, untie, mt5) in models.items()},
               "target_ids": TARGET_IDS, "row_lengths": ROW_LENGTHS,
               "decoder_steps": DECODER_STEPS, "bucket_settings": BUCKET_SETTINGS,
               "relative_range": RELATIVE_RANGE}, f, indent=2)
    f.write("\n")


if __name__ == "__main__":
  import sys

  main(tuple(sys.argv[1:]))
