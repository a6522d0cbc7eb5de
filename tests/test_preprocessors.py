"""monoT5 preprocessors on literal rows: ids by hand, parity with `t5rank.models.inputs.encode_pairs`."""

import pytest
import seqio
import tensorflow as tf
from seqio import test_utils

from t5rank.data import preprocessors
from t5rank.models.inputs import encode_pairs
from t5rank.models.vocab import TargetWordError, load_vocabulary

TEXTS = ["Query:", "Document:", "Relevant:", "what is a deductible?", "",
         "Coverage follows the car.  Example 1: If you were given a car (loaned)",
         "法律要求残疾保险吗？", "über café"]


def _features():
  return preprocessors.output_features()


def test_seqio_vocabulary_gives_the_same_ids_as_t5rank_vocabulary():
  ours, theirs = load_vocabulary(), preprocessors.seqio_vocabulary()
  assert theirs.vocab_size == ours.vocab_size == 32_100
  for text in TEXTS:
    assert list(theirs.encode(text)) == ours.encode(text), text
    assert list(theirs.encode_tf(tf.constant(text)).numpy()) == ours.encode(text), text
  assert theirs.decode([1176, 6136]) == ours.decode([1176, 6136]) == "true false"
  # The one difference: SeqIO reads sentinel text as a sentinel id; t5rank (and tokenize_monot5)
  # read it as plain text, as the scorer does.
  assert list(theirs.encode("<extra_id_0>")) == [32099]
  assert ours.encode("<extra_id_0>")[:3] == [3, 2, 25666]


def test_seqio_vocabulary_by_name_gives_the_same_ids_and_extra_ids():
  ours = load_vocabulary("insuranceqa_en_8k")
  theirs = preprocessors.seqio_vocabulary("insuranceqa_en_8k")
  assert theirs.extra_ids == ours.extra_ids == 0 and theirs.vocab_size == ours.vocab_size == 8000
  for text in TEXTS:
    assert list(theirs.encode(text)) == ours.encode(text), text
  t5 = preprocessors.seqio_vocabulary()
  assert (t5.sentencepiece_model_file, t5.extra_ids) == (load_vocabulary().path, 100)


def test_the_bilingual_vocabulary_covers_chinese_and_has_single_piece_target_words():
  vocab = load_vocabulary("insuranceqa_enzh_16k")
  assert (vocab.base_vocab_size, vocab.extra_ids, vocab.vocab_size) == (16000, 100, 16100)
  t5 = load_vocabulary()
  zh = "租金保险涵盖什么？人寿保险的现金价值是多少？"
  assert 2 not in vocab.encode(zh)  # no <unk>
  assert t5.encode(zh).count(2) >= 2  # T5's vocabulary has almost no Chinese pieces
  for word in ("yes", "no", "true", "false"):
    assert vocab.pieces(word) == ["▁" + word]
  assert vocab.decode(vocab.encode("What does renters insurance cover?")) == (
      "What does renters insurance cover?")
  assert preprocessors.seqio_vocabulary("insuranceqa_enzh_16k").vocab_size == 16100


def test_format_and_tokenize_use_the_vocabulary_of_the_features():
  features = preprocessors.output_features("insuranceqa_en_8k")
  ds = tf.data.Dataset.from_tensors({"query": "what is a deductible?", "document": "You pay it.",
                                     "label": 0})
  ds = preprocessors.format_monot5(ds, targets="hot_cold", output_features=features)
  ex = next(preprocessors.tokenize_monot5(ds, features).as_numpy_iterator())
  vocab = load_vocabulary("insuranceqa_en_8k")
  assert ex["targets_pretokenized"] == b"cold" and ex["targets"].tolist() == [7989, 1]  # ▁cold
  assert ex["inputs"].tolist() == vocab.encode(ex["inputs_pretokenized"].decode()) + [1]


def test_split_triples_puts_positive_then_negative():
  ds = tf.data.Dataset.from_tensor_slices(
      {"query": ["q1", "q2"], "positive": ["p1", "p2"], "negative": ["n1", "n2"]})
  test_utils.assert_dataset(preprocessors.split_triples(ds), [
      {"query": "q1", "document": "p1", "label": 1}, {"query": "q1", "document": "n1", "label": 0},
      {"query": "q2", "document": "p2", "label": 1}, {"query": "q2", "document": "n2", "label": 0}])


@pytest.mark.parametrize("targets,words", [("true_false", ("true", "false")),
                                           ("hot_cold", ("hot", "cold")),
                                           ("ab_de", ("ab", "de")), (("yes", "no"), ("yes", "no"))])
def test_format_monot5(targets, words):
  ds = tf.data.Dataset.from_tensor_slices(
      {"query": ["what is a deductible"] * 2,
       "document": ["The amount you pay first.", "Cars."], "label": [1, 0]})
  test_utils.assert_dataset(preprocessors.format_monot5(ds, targets=targets), [
      {"query": "what is a deductible", "document": "The amount you pay first.", "label": 1,
       "inputs": "Query: what is a deductible Document: The amount you pay first. Relevant:",
       "targets": words[0]},
      {"query": "what is a deductible", "document": "Cars.", "label": 0,
       "inputs": "Query: what is a deductible Document: Cars. Relevant:", "targets": words[1]}])


def test_format_monot5_rejects_a_word_of_several_pieces():
  with pytest.raises(TargetWordError, match="relevantness"):
    preprocessors.format_monot5(tf.data.Dataset.range(1), targets=("relevantness", "no"))


def _tokenized(query, document, label, max_length, targets="true_false"):
  ds = tf.data.Dataset.from_tensors({"query": query, "document": document, "label": label})
  ds = preprocessors.format_monot5(ds, targets=targets)
  ds = preprocessors.tokenize_monot5(ds, _features(), {"inputs": max_length, "targets": 2})
  return next(ds.as_numpy_iterator())


def test_tokenize_monot5_ids_by_hand():
  ex = _tokenized("what is a deductible?", "You pay it first.", 1, 512)
  vocab = load_vocabulary()
  # "▁" "Query" ":" | query | "▁Document" ":" | document | "▁Relevan" "t" ":" | EOS
  assert ex["inputs"].tolist() == ([3, 27569, 10] + vocab.encode("what is a deductible?")
                                   + [11167, 10] + vocab.encode("You pay it first.")
                                   + [31484, 17, 10, 1])
  assert ex["targets"].tolist() == [1176, 1]  # ▁true, EOS
  assert _tokenized("q", "d", 0, 512)["targets"].tolist() == [6136, 1]  # ▁false, EOS
  assert _tokenized("q", "d", 1, 512, "ab_de")["targets"].tolist() == [703, 1]  # ▁ab
  assert ex["targets_pretokenized"] == b"true"
  assert ex["inputs_pretokenized"] == b"Query: what is a deductible? Document: You pay it first. Relevant:"


@pytest.mark.parametrize("max_length", [512, 24, 12])
def test_tokenize_monot5_matches_encode_pairs(max_length):
  pairs = [("what is a deductible?", "The amount you pay before the insurer pays. " * 6),
           ("can i cancel my life insurance policy at any time in any state of the union?",
            "Yes."), ("法律要求残疾保险吗？", "Coverage follows the car."),
           ("what is <extra_id_0>?", "über café <extra_id_1>")]
  expected = encode_pairs(load_vocabulary(), [q for q, _ in pairs], [d for _, d in pairs],
                          max_length)
  for (query, document), ids in zip(pairs, expected):
    got = _tokenized(query, document, 1, max_length)["inputs"].tolist()
    assert got == ids
    assert len(got) <= max_length and got[-4:] == [31484, 17, 10, 1]


def test_tokenize_monot5_rejects_a_length_below_the_template():
  ds = tf.data.Dataset.from_tensors({"query": "q", "document": "d", "label": 1})
  with pytest.raises(ValueError, match="cannot hold the template"):
    preprocessors.tokenize_monot5(ds, _features(), {"inputs": 8, "targets": 2})


def test_query_records_to_triples_pairs_every_positive_with_every_negative():
  ds = tf.data.Dataset.from_tensors(
      {"query": "q", "positives": ["p1", "p2"], "negatives": ["n1", "n2", "n3"]})
  test_utils.assert_dataset(preprocessors.query_records_to_triples(ds), [
      {"query": "q", "positive": p, "negative": n}
      for p in ("p1", "p2") for n in ("n1", "n2", "n3")])


def test_feature_converter_ids_by_hand():
  """One positive and one negative, unpacked then packed into one row."""
  ds = tf.data.Dataset.from_tensor_slices({"query": ["cost"] * 2, "document": ["low", "high"],
                                           "label": [1, 0]})
  ds = preprocessors.tokenize_monot5(preprocessors.format_monot5(ds), _features(),
                                     {"inputs": 16, "targets": 2})
  vocab = load_vocabulary()
  cost, low, high = vocab.encode("cost"), vocab.encode("low"), vocab.encode("high")
  assert (len(cost), len(low), len(high)) == (1, 1, 1)
  pos = [3, 27569, 10] + cost + [11167, 10] + low + [31484, 17, 10, 1]
  neg = [3, 27569, 10] + cost + [11167, 10] + high + [31484, 17, 10, 1]
  rows = list(seqio.EncDecFeatureConverter(pack=False)(
      ds, {"inputs": 12, "targets": 2}).as_numpy_iterator())
  assert rows[0]["encoder_input_tokens"].tolist() == pos + [0]
  assert rows[0]["decoder_target_tokens"].tolist() == [1176, 1]
  assert rows[0]["decoder_input_tokens"].tolist() == [0, 1176]
  assert rows[0]["decoder_loss_weights"].tolist() == [1, 1]
  assert rows[1]["decoder_target_tokens"].tolist() == [6136, 1]
  packed = list(seqio.EncDecFeatureConverter(pack=True)(
      ds, {"inputs": 24, "targets": 4}).as_numpy_iterator())
  assert len(packed) == 1
  row = packed[0]
  assert row["encoder_input_tokens"].tolist() == pos + neg + [0, 0]
  assert row["encoder_segment_ids"].tolist() == [1] * 11 + [2] * 11 + [0, 0]
  assert row["encoder_positions"].tolist() == list(range(11)) * 2 + [0, 0]
  assert row["decoder_target_tokens"].tolist() == [1176, 1, 6136, 1]
  assert row["decoder_input_tokens"].tolist() == [0, 1176, 0, 6136]
  assert row["decoder_segment_ids"].tolist() == [1, 1, 2, 2]
  assert row["decoder_positions"].tolist() == [0, 1, 0, 1]
