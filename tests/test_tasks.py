"""Task registrations and the training pipeline: balance, determinism, resume, shards, TFDS, CLI."""

import itertools

import gin
import numpy as np
import pytest
import seqio
import tensorflow_datasets as tfds

import t5rank.tasks
from t5rank import cli
from t5rank.data import preprocessors
from t5rank.data import seqio_tasks
from t5rank.data import tfds_builders
from t5rank.data.training_data import training_dataset
from t5rank.models.vocab import load_vocabulary

LENGTHS = {"inputs": 32, "targets": 2}
TRUE, FALSE = 1176, 6136


def test_import_registers_every_dataset_and_variant():
  names = set(seqio.TaskRegistry.names())
  for dataset in ("insuranceqa_en", "insuranceqa_zh", "insuranceqa_en_8k", "msmarco_passage",
                  "msmarco_passage_qidpid", "generic", "insuranceqa_en_tfds", "insuranceqa_zh_tfds",
                  "msmarco_passage_tfds"):
    for variant in seqio_tasks.VARIANTS:
      assert f"{dataset}_monot5_{variant}" in names
  assert "insuranceqa_en_monot5_true_false_1k_s4" in names
  assert "insuranceqa_en_8k_pseudo_monot5_true_false" in names
  assert seqio_tasks.task_vocabulary("insuranceqa_en_8k_pseudo_monot5_true_false").path == \
      load_vocabulary("insuranceqa_en_8k").path
  assert seqio_tasks.task_target_words("insuranceqa_en_8k_pseudo_monot5_true_false") == "true_false"
  assert "msmarco_passage_monot5_true_false_10k_s0" in names
  assert seqio_tasks.task_bm25_in_input("insuranceqa_en_8k_pseudo_bm25_monot5_true_false")
  assert not seqio_tasks.task_bm25_in_input("insuranceqa_en_8k_pseudo_monot5_true_false")
  assert t5rank.tasks.__file__.endswith("tasks/__init__.py")


def test_the_cards_top_level_tasks_and_gin(tmp_path, monkeypatch):
  """tasks/ and gin/ sit beside t5rank/: `import tasks` from the checkout and `import t5rank.tasks`
  register the same tasks once; a gin file's name resolves from any working directory."""
  import os
  import subprocess
  import sys

  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  code = ("import tasks, t5rank.tasks, seqio; n = len(seqio.TaskRegistry.names()); "
          "import t5rank.tasks.registrations; print(n == len(seqio.TaskRegistry.names()) > 100)")
  done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="3"),
                        timeout=300)
  assert done.stdout.strip() == "True", done.stderr[-2000:]
  assert os.path.isfile(os.path.join(root, "gin", "experiments", "tiny_insuranceqa_cpu.gin"))
  from t5rank.training import gin_config

  monkeypatch.chdir(tmp_path)
  gin_config.parse_gin(["gin/experiments/tiny_insuranceqa_cpu.gin"], ["MODEL_DIR = 'x'"])
  gin.clear_config()


def test_insuranceqa_8k_tasks_tokenize_with_their_vocabulary():
  vocab = seqio_tasks.task_vocabulary("insuranceqa_en_8k_monot5_ab_de")
  assert (vocab.path, vocab.extra_ids) == (load_vocabulary("insuranceqa_en_8k").path, 0)
  assert seqio_tasks.task_vocabulary("insuranceqa_en_monot5_ab_de").vocab_size == 32_100
  assert seqio_tasks.task_vocabulary("not_a_task") is None
  batch = _batches("insuranceqa_en_8k_monot5_ab_de", 1)[0]
  assert batch["decoder_target_tokens"].tolist() == [[7988, 1], [1919, 1]] * 2  # ▁ab, ▁de
  tokens = batch["encoder_input_tokens"]
  assert 0 <= tokens.min() and tokens.max() < 8000
  assert tokens[0, :4].tolist() == vocab.encode("Query:") == [5135, 3224, 2282, 160]
  assert vocab.decode(tokens[0]).startswith("Query: ")
  assert vocab.decode(tokens[1]).endswith(" Relevant:")


def test_bm25_task_writes_each_pairs_score_into_the_same_inputs():
  from t5rank.models.inputs import format_input

  name, plain = "insuranceqa_en_8k_pseudo_bm25_monot5_true_false", "insuranceqa_en_8k_monot5_true_false"
  lengths = {"inputs": 512, "targets": 2}
  scored = _batches(name, 2, feature_lengths=lengths)
  unscored = _batches(plain, 2, feature_lengths=lengths)
  table = seqio.get_mixture_or_task(name).source.table("validation")
  triples = list(itertools.islice(table.triples(seed=3), 4))  # the two batches' triples, in order
  vocab = seqio_tasks.task_vocabulary(name)
  texts = [vocab.decode([t for t in row if t]) for b in scored for row in b["encoder_input_tokens"]]
  plain_texts = [vocab.decode([t for t in row if t]) for b in unscored
                 for row in b["encoder_input_tokens"]]
  for i, (query, positive, negative, s_pos, s_neg) in enumerate(triples):
    for j, (document, score) in enumerate(((positive, s_pos), (negative, s_neg))):
      assert texts[2 * i + j] == vocab.decode(vocab.encode(format_input(query, document, score)))
      assert texts[2 * i + j].replace(f" BM25: {round(score)}", "") == plain_texts[2 * i + j]


def _batches(name, n, **kwargs):
  kwargs = {"batch_size": 4, "feature_lengths": LENGTHS, "seed": 3, "split": "validation", **kwargs}
  return list(itertools.islice(training_dataset(name, **kwargs), n))


def _equal(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    assert x.keys() == y.keys()
    for k in x:
      np.testing.assert_array_equal(x[k], y[k])


def test_batches_are_balanced_deterministic_and_resumable():
  name = "insuranceqa_en_monot5_hot_cold"
  batches = _batches(name, 4)
  for batch in batches:
    assert batch["encoder_input_tokens"].shape == (4, 32)
    assert batch["decoder_target_tokens"][:, 0].tolist() == [1312, 2107] * 2  # ▁hot, ▁cold
    pos, neg = batch["encoder_input_tokens"][0], batch["encoder_input_tokens"][1]
    assert pos[:10].tolist() == neg[:10].tolist()  # same query, first the positive
  _equal(batches, _batches(name, 4))
  _equal(batches[3:], _batches(name, 1, start_step=3))
  assert not np.array_equal(batches[0]["encoder_input_tokens"],
                            _batches(name, 1, seed=4)[0]["encoder_input_tokens"])


def test_shards_split_each_global_batch():
  name = "insuranceqa_en_monot5_true_false"
  whole = _batches(name, 2, batch_size=8, start_step=5)
  parts = [_batches(name, 2, batch_size=8, start_step=5, shard_index=i, num_shards=2)
           for i in range(2)]
  for step in range(2):
    rows = whole[step]["encoder_input_tokens"].reshape(2, 2, 2, -1)  # (pair/2, shard, 2, L)
    for i in range(2):
      assert parts[i][step]["decoder_target_tokens"][:, 0].tolist() == [TRUE, FALSE] * 2
      np.testing.assert_array_equal(parts[i][step]["encoder_input_tokens"].reshape(2, 2, -1),
                                    rows[:, i])


def test_odd_batches_are_refused():
  with pytest.raises(ValueError, match="multiple of 2 \\* num_shards"):
    training_dataset("insuranceqa_en_monot5_true_false", batch_size=6, feature_lengths=LENGTHS,
                     seed=0, num_shards=2)


@pytest.fixture
def generic_files(tmp_path):
  """Four queries with one relevant and two candidate non-relevant documents each, bound in gin."""
  (tmp_path / "q.tsv").write_text("".join(f"q{i}\tis car {i} covered\n" for i in range(4)))
  (tmp_path / "c.jsonl").write_text("".join(
      f'{{"id": "d{i}", "text": "yes car {i} is"}}\n{{"id": "n{i}", "text": "boats {i} float"}}\n'
      for i in range(4)))
  (tmp_path / "qrels").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(4)))
  (tmp_path / "run").write_text("".join(f"q{i} d{i}\nq{i} n{i}\nq{i} n{(i + 1) % 4}\n"
                                        for i in range(4)))
  with gin.unlock_config():
    for key, file in (("queries", "q.tsv"), ("corpus", "c.jsonl"), ("qrels", "qrels"),
                      ("run", "run")):
      gin.bind_parameter(f"generic_triples.{key}", str(tmp_path / file))
  yield
  gin.clear_config()


def test_packed_batches_resume_exactly(generic_files):
  kwargs = dict(split="train", feature_lengths={"inputs": 48, "targets": 8}, pack=True,
                batch_size=2)
  batches = _batches("generic_monot5_true_false", 4, **kwargs)
  assert batches[0]["encoder_segment_ids"].max() >= 2  # several examples per row
  assert batches[0]["decoder_segment_ids"].shape == (2, 8)
  _equal(batches[2:], _batches("generic_monot5_true_false", 2, start_step=2, **kwargs))


def test_generic_task_from_gin_bound_files(generic_files):
  batch = _batches("generic_monot5_yes_no", 1, split="train", batch_size=2, seed=0)[0]
  vocab = load_vocabulary()
  query, positive, negative = (vocab.decode(row) for row in (
      batch["encoder_input_tokens"][0][:8], *batch["encoder_input_tokens"]))
  i = positive.split()[3]
  assert positive == f"Query: is car {i} covered Document: yes car {i} is Relevant:"
  assert negative.startswith(f"Query: is car {i} covered Document: boats ")
  assert batch["decoder_target_tokens"].tolist() == [[4273, 1], [150, 1]]  # ▁yes, ▁no


def test_insuranceqa_tfds_builder_and_tfds_task(tmp_path):
  config = tfds_builders.InsuranceqaV2Config(name="en_tiny", language="en", max_queries=3)
  builder = tfds_builders.InsuranceqaV2(config=config, data_dir=str(tmp_path))
  builder.download_and_prepare()
  records = list(tfds.as_numpy(builder.as_dataset(split="validation", shuffle_files=False)))
  assert sorted(r["query_id"] for r in records) == [b"0", b"1", b"2"]
  first = next(r for r in records if r["query_id"] == b"0")
  assert first["query"] == b"Does Medicare Pick Up Co Pays?"  # whitespace runs collapsed
  assert len(first["positives"]) == 1 and len(first["negatives"]) == 200

  source = seqio.TfdsDataSource("insuranceqa_v2:2.0.0", tfds_data_dir=str(tmp_path),
                                tfds_builder_kwargs={"config": config},
                                splits=["train", "validation"])
  name = "test_insuranceqa_tiny_monot5_true_false"
  seqio_tasks.register_monot5_task(name, source, "true_false",
                                   [preprocessors.query_records_to_triples])
  try:
    batches = _batches(name, 2, shuffle_buffer_size=1000)
    _equal(batches[1:], _batches(name, 1, shuffle_buffer_size=1000, start_step=1))
  finally:
    seqio.TaskRegistry.remove(name)
  for batch in batches:
    assert batch["decoder_target_tokens"][:, 0].tolist() == [TRUE, FALSE] * 2


def test_inspect_task_prints_decoded_examples(capsys):
  assert cli.main(["inspect-task", "insuranceqa_en_monot5_apple_orange", "--split", "test",
                   "--num-examples", "2", "--max-length", "24"]) == 0
  out = capsys.readouterr().out
  assert out.count("--- example") == 2
  assert "targets text: apple" in out and "targets text: orange" in out
  assert "inputs text:  Query: What Happens When Term Life Insurance Is Paid Up?" in out
  assert "targets (2 ids): [8947, 1]" in out
  assert "'▁Relevan', 't', ':', '</s>'" in out


def test_tasks_record_their_target_words_for_the_final_checkpoint():
  from t5rank.data.seqio_tasks import task_target_words
  assert task_target_words("insuranceqa_en_monot5_hot_cold") == "hot_cold"
  assert task_target_words("msmarco_passage_monot5_false_true") == "false_true"
  assert task_target_words("insuranceqa_en_monot5_true_false_1k_s3") == "true_false"
  assert task_target_words("not_a_monot5_task") is None
