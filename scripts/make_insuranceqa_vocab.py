"""Trains the English InsuranceQA SentencePiece vocabulary, t5rank/data/insuranceqa_en_8k.model.

    .venv/bin/python scripts/make_insuranceqa_vocab.py [--output PATH]

Texts: the English of all 27,413 InsuranceQA v2 answers, then of the 12,889 training queries (never
validation or test queries), each in id order, from the offline `insuranceqa-data` package. Model:
unigram, 8,000 pieces in T5's id layout (pad 0, eos 1, unk 2, no bos, no extra ids), nmt_nfkc
normalization, every character covered. Deterministic: all sentences are used in order (no sampling,
no shuffling) on one thread, so every run writes the same bytes.

Every target word of `t5rank.models.vocab.TARGET_WORDS` must be one piece. Training gives `▁true`,
`▁false`, `▁hot`, `▁yes`, `▁no` and `▁de`, but not `▁cold`, `▁apple`, `▁orange` or `▁ab`; those take
the places of the lowest-scoring multi-character pieces (`add_target_pieces`). SentencePiece's
user_defined_symbols would not do: they are cut out of any text greedily, so `about` would become
`▁ab` + `out`. The script fails if a target word is still not one piece. It prints the piece count,
the tokens per answer (and T5's), the pieces replaced and the file's sha256. About 30 s on one core.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from t5rank.models.vocab import (DEFAULT_SPM_PATH, TARGET_WORDS, Vocabulary,  # noqa: E402
                          target_word_id)

OUTPUT = os.path.join(REPO, "t5rank", "data", "insuranceqa_en_8k.model")
VOCAB_SIZE = 8000
MAX_SENTENCE_BYTES = 1 << 14  # the longest answer has 6,490 bytes; SentencePiece's default is 4,192


def training_texts() -> tuple[list[str], list[str]]:
  """(answers, training queries): the English texts, each list in id order."""
  from t5rank.data.insuranceqa import load_records

  queries, answers = load_records("train", "en")  # raw: the file was trained on these bytes
  return ([answers[aid]["en"] for aid in sorted(answers, key=int)],
          [queries[qid]["en"] for qid in sorted(queries, key=int)])


def train_vocabulary(texts: list[str], vocab_size: int = VOCAB_SIZE,
                     character_coverage: float = 1.0) -> bytes:
  """The serialized unigram model of `vocab_size` pieces trained on `texts`, one sentence each."""
  longest = max(len(t.encode("utf-8")) for t in texts)
  if longest > MAX_SENTENCE_BYTES:
    raise ValueError(f"a text of {longest} bytes is longer than MAX_SENTENCE_BYTES "
                     f"{MAX_SENTENCE_BYTES}; SentencePiece would skip it")
  model = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(texts), model_writer=model, model_type="unigram",
      vocab_size=vocab_size, pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
      normalization_rule_name="nmt_nfkc", character_coverage=character_coverage,
      input_sentence_size=0, shuffle_input_sentence=False, max_sentence_length=MAX_SENTENCE_BYTES,
      num_threads=1, minloglevel=2)
  return model.getvalue()


def target_pieces() -> list[str]:
  """The piece each target word must be: `▁word`, or the word itself when written `▁ab`."""
  words = dict.fromkeys(word for pair in TARGET_WORDS.values() for word in pair)
  return [word if word.startswith("▁") else "▁" + word for word in words]


def add_target_pieces(proto: bytes) -> tuple[bytes, list[tuple[str, str]]]:
  """(model, [(piece added, piece it replaced)]): `proto` with each target piece it lacks in the
  place of one of its lowest-scoring multi-character pieces, those unigram training would have
  pruned next (single characters stay, so no text gains unknown pieces). An added piece scores its
  word's best segmentation without it plus one nat: the word alone encodes as the one piece, other
  text uses it only where the Viterbi segmentation prefers it."""
  model = sentencepiece_model_pb2.ModelProto.FromString(proto)
  processor = spm.SentencePieceProcessor(model_proto=proto)
  present = {p.piece for p in model.pieces}
  missing = [piece for piece in target_pieces() if piece not in present]
  normal = sentencepiece_model_pb2.ModelProto.SentencePiece.NORMAL
  slots = sorted((i for i, p in enumerate(model.pieces) if p.type == normal and len(p.piece) > 1),
                 key=lambda i: (model.pieces[i].score, i))
  replaced = []
  for piece, slot in zip(missing, slots):
    split = processor.encode(piece[1:])
    replaced.append((piece, model.pieces[slot].piece))
    model.pieces[slot].piece = piece
    model.pieces[slot].score = sum(processor.get_score(i) for i in split) + 1.0
  return model.SerializeToString(), replaced


def check_target_words(vocab: Vocabulary) -> None:
  """Raises SystemExit unless every target word's text encodes to exactly its one piece (what
  `t5rank.data.preprocessors.target_texts` requires)."""
  problems = []
  for piece in target_pieces():
    try:
      token_id = target_word_id(vocab, piece)
    except ValueError as e:
      problems.append(str(e))
      continue
    if vocab.encode(piece[1:]) != [token_id]:
      problems.append(f"{piece[1:]!r} encodes to {vocab.pieces(piece[1:])}, not [{piece!r}]")
  if problems:
    raise SystemExit("target words that are not single pieces:\n  " + "\n  ".join(problems))


def write_checked(proto: bytes, output: str) -> Vocabulary:
  """Writes the model to `output` (through a temporary file) only if `check_target_words` passes;
  returns it as a `Vocabulary` (no extra ids)."""
  tmp = output + ".tmp"
  with open(tmp, "wb") as f:
    f.write(proto)
  try:
    check_target_words(Vocabulary(tmp, extra_ids=0))
  except SystemExit:
    os.remove(tmp)
    raise
  os.replace(tmp, output)
  return Vocabulary(output, extra_ids=0)


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--output", default=OUTPUT, help=f"where to write (default: {OUTPUT})")
  args = parser.parse_args()

  answers, queries = training_texts()
  print(f"training on {len(answers)} answers + {len(queries)} training queries", flush=True)
  proto, replaced = add_target_pieces(train_vocabulary(answers + queries))
  vocab = write_checked(proto, args.output)

  ours = sum(map(len, vocab.encode_batch(answers))) / len(answers)
  theirs = sum(map(len, Vocabulary(DEFAULT_SPM_PATH).encode_batch(answers))) / len(answers)
  print("target pieces added: " + ", ".join(f"{new} (in place of {old})" for new, old in replaced))
  print(f"tokens per answer: {ours:.1f} (T5's 32k vocabulary: {theirs:.1f})")
  print(f"wrote {args.output}: {vocab.base_vocab_size} pieces, "
        f"sha256 {hashlib.sha256(proto).hexdigest()}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
