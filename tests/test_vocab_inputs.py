"""Vocabulary id layout, target-word registry, and the monoT5 input template with truncation."""

import pytest

from t5rank.models.inputs import encode_pair, encode_pairs, format_input
from t5rank.models.vocab import (DEFAULT_SPM_PATH, EOS_ID, TARGET_WORDS, TargetWordError, load_vocabulary,
                          resolve_target_words)


@pytest.fixture(scope="module")
def vocab():
  return load_vocabulary()


def test_id_layout(vocab):
  assert vocab.base_vocab_size == 32000 and vocab.vocab_size == 32100
  assert [vocab.id_to_piece(i) for i in (0, 1, 2)] == ["<pad>", "</s>", "<unk>"]
  assert vocab.piece_to_id("<extra_id_0>") == 32099 and vocab.id_to_piece(32000) == "<extra_id_99>"
  assert vocab.encode("true") == [1176] and vocab.encode("false") == [6136]


def test_paper_target_words(vocab):
  # Ids of T5's SentencePiece model (t5rank/data/t5_spiece.model): `vocab.piece_to_id("▁true")`.
  expected = {"true_false": (1176, 6136), "false_true": (6136, 1176), "hot_cold": (1312, 2107),
              "apple_orange": (8947, 5470), "hot_orange": (1312, 5470), "ab_de": (703, 20),
              "yes_no": (4273, 150)}
  assert {name: resolve_target_words(vocab, name) for name in TARGET_WORDS} == expected
  assert resolve_target_words(vocab, ("yes", "no")) == (4273, 150)


def test_multi_piece_target_word_is_an_error(vocab):
  with pytest.raises(TargetWordError, match=r"'reinsurance'.*\['▁', 're', 'insurance'\]"):
    resolve_target_words(vocab, ("reinsurance", "no"))
  with pytest.raises(KeyError, match="unknown target words"):
    resolve_target_words(vocab, "up_down")


def test_input_ids_equal_whole_string_tokenization(vocab):
  pairs = [("what is life insurance?", "Life insurance pays a benefit when you die."),
           ("  spaced   query ", "text\twith\ttabs and  double  spaces."),
           ("中国的保险", "人寿保险是一种保险。"), ("q", "")]
  for query, document in pairs:
    whole = vocab.encode(format_input(query, document)) + [EOS_ID]
    assert encode_pair(vocab, query, document) == whole


def test_truncation_cuts_the_document_only(vocab):
  query = "how long does an underwriting review take?"
  document = "The underwriter reviews the medical records. " * 200
  ids = encode_pair(vocab, query, document, max_length=64)
  assert len(ids) == 64
  suffix = vocab.encode("Relevant:") + [EOS_ID]
  assert ids[-len(suffix):] == suffix
  prefix = vocab.encode(f"Query: {query} Document:")
  assert ids[:len(prefix)] == prefix
  short = encode_pair(vocab, query, "short answer", max_length=64)
  assert len(short) < 64 and short == vocab.encode(format_input(query, "short answer")) + [EOS_ID]


def test_overlong_query_keeps_template(vocab):
  ids = encode_pair(vocab, "word " * 100, "document", max_length=32)
  assert len(ids) == 32
  assert ids[-4:] == vocab.encode("Relevant:") + [EOS_ID]
  assert ids[:3] == vocab.encode("Query:")
  with pytest.raises(ValueError, match="cannot hold the template"):
    encode_pair(vocab, "q", "d", max_length=5)
  with pytest.raises(ValueError, match="2 queries but 1 documents"):
    encode_pairs(vocab, ["a", "b"], ["c"])


# The file scripts/make_insuranceqa_vocab.py writes (it checks that two runs give the same bytes).
INSURANCEQA_EN_8K_SHA256 = "84adbd07f54921de4bda5e37ff797ec2d8d975228d659f7bd13e45a681b433aa"


def test_vocabularies_by_name_and_path():
  t5 = load_vocabulary("t5")
  assert (t5.path, t5.extra_ids, t5.vocab_size) == (DEFAULT_SPM_PATH, 100, 32100)
  assert load_vocabulary(DEFAULT_SPM_PATH).vocab_size == 32100  # a path: T5's 100 extra ids
  iqa = load_vocabulary("insuranceqa_en_8k")
  assert iqa.sha256 == INSURANCEQA_EN_8K_SHA256
  assert (iqa.base_vocab_size, iqa.extra_ids, iqa.vocab_size) == (8000, 0, 8000)
  assert [iqa.id_to_piece(i) for i in (0, 1, 2)] == ["<pad>", "</s>", "<unk>"]
  assert load_vocabulary(iqa.path, 0).encode("premium") == iqa.encode("premium")
  with pytest.raises(FileNotFoundError, match="neither a name \\(t5, insuranceqa_en_8k, "
                     "insuranceqa_en_8k_sentinels, insuranceqa_enzh_16k, mt5\\)"):
    load_vocabulary("insuranceqa_en_32k")


def test_insuranceqa_vocabulary_encodes_the_template_and_every_target_word():
  vocab = load_vocabulary("insuranceqa_en_8k")
  text = "Query: what is a deductible? Document: The amount you pay first. Relevant:"
  assert vocab.pieces(text) == [
      "▁Q", "ue", "ry", ":", "▁what", "▁is", "▁a", "▁deductible", "?", "▁Do", "cu", "ment", ":",
      "▁The", "▁amount", "▁you", "▁pay", "▁first", ".", "▁Re", "le", "v", "ant", ":"]
  assert encode_pair(vocab, "what is a deductible?", "The amount you pay first.") == (
      vocab.encode(text) + [EOS_ID])
  assert vocab.encode("true") == [961] and vocab.encode("false") == [4396]
  assert {name: resolve_target_words(vocab, name) for name in TARGET_WORDS} == {
      "true_false": (961, 4396), "false_true": (4396, 961), "hot_cold": (4487, 7989),
      "apple_orange": (7986, 7987), "hot_orange": (4487, 7987), "ab_de": (7988, 1919),
      "yes_no": (601, 95)}
  for word in ("cold", "apple", "orange", "ab"):  # added pieces: the word alone is one piece
    assert vocab.pieces(word) == ["▁" + word]
  assert vocab.pieces("about") == ["▁about"]  # and other words keep their segmentation
