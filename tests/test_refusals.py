"""Nothing silently wrong, round two: the newer commands refuse non-finite vectors, tuning on
nothing, untrained models, unknown gin macros, files swapped under a checkpoint or an index, and
fail in one line that names the file where they crashed or printed a traceback.

Each case reproduces a finding of the second hostile-user review (issue "Nothing lost, round two").
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from t5rank import cli
from t5rank.models.words import WordVocabulary, save_embeddings

TEXTS = {"d1": "car insurance policy", "d2": "life insurance cover", "d3": "annuity income",
         "d4": "car accident claim"}


def embeddings(path, nan_word: str = "") -> str:
  """A `t5rank embeddings` directory over TEXTS' words (6-d random vectors); the vector of
  `nan_word` NaN."""
  vocabulary = WordVocabulary.build(TEXTS.values(), min_count=1)
  vectors = np.random.default_rng(0).normal(size=(vocabulary.size, 6)).astype(np.float32)
  vectors[:2] = 0
  if nan_word:
    vectors[vocabulary.index[nan_word]] = np.nan
  save_embeddings(str(path), vocabulary, vectors, {"source": "test"})
  return str(path)


def corpus_file(tmp_path) -> str:
  path = tmp_path / "corpus.jsonl"
  path.write_text("".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in TEXTS.items()))
  return str(path)


def queries_file(tmp_path) -> str:
  path = tmp_path / "queries.tsv"
  path.write_text("q1\tcar insurance\nq2\tannuity\n")
  return str(path)


# ------------------------------------------------------------------------ non-finite numbers


def test_a_nan_word_vector_is_refused_before_anything_is_indexed(tmp_path):
  emb = embeddings(tmp_path / "emb", nan_word="insurance")
  with pytest.raises(SystemExit, match=r"t5rank index: .*emb/vectors.npy: 1 row\(s\) hold NaN or "
                     r"inf, e.g. the vector of 'insurance'"):
    cli.main(["index", "--encoder", emb, "--corpus", corpus_file(tmp_path), "--output",
              str(tmp_path / "ix")])
  assert not (tmp_path / "ix").exists()


def test_a_retriever_and_a_run_refuse_nan(tmp_path):
  from t5rank.data.readers import write_run
  from t5rank.retrieval.dense import DenseRetriever
  from t5rank.retrieval.encoders import load_encoder

  encoder = load_encoder(embeddings(tmp_path / "emb"))
  vectors = np.ones((2, 6), np.float32)
  vectors[1, 3] = np.nan
  with pytest.raises(ValueError, match=r"hold NaN or inf for 1 document\(s\), e.g. 'b'"):
    DenseRetriever(encoder, ["a", "b"], vectors)
  with pytest.raises(ValueError, match=r"out.run holds 1 non-finite score\(s\), e.g. query 'q1', "
                     r"document 'b': nan"):
    write_run(str(tmp_path / "out.run"), {"q1": [("a", 1.0), ("b", float("nan"))]}, "x")
  assert not (tmp_path / "out.run").exists()


@pytest.mark.parametrize("qrels, message", [
    ("", "judge a relevant document for 0 queries"),
    ("q9 0 d1 1\n", "judge a relevant document for 1 queries, none of them a query of the tuning "
                    "runs"),
])
def test_fuse_refuses_to_tune_on_queries_without_judgments(tmp_path, qrels, message):
  for name, scores in (("a", (2.0, 1.0)), ("b", (1.0, 2.0))):
    (tmp_path / f"{name}.run").write_text(f"q1 Q0 d1 1 {scores[0]} {name}\n"
                                          f"q1 Q0 d2 2 {scores[1]} {name}\n")
  (tmp_path / "qrels").write_text(qrels)
  runs = [str(tmp_path / "a.run"), str(tmp_path / "b.run")]
  with pytest.raises(SystemExit, match=message):
    cli.main(["fuse", *runs, "--tune", str(tmp_path / "qrels"), *runs, "-o",
              str(tmp_path / "fused.run")])
  assert not (tmp_path / "fused.run").exists()


# ------------------------------------------------------------------- files tied to their index


def test_an_index_file_swapped_for_one_of_the_same_shape_is_refused(tmp_path):
  emb = embeddings(tmp_path / "emb")
  index = tmp_path / "ix"
  assert cli.main(["index", "--encoder", emb, "--corpus", corpus_file(tmp_path), "--output",
                   str(index)]) == 0
  vectors = np.load(index / "vectors.npy")
  np.save(index / "vectors.npy", vectors[::-1])  # the same shape, rows in another order
  with pytest.raises(SystemExit, match=r"t5rank retrieve: .*ix/vectors.npy is not the file the "
                     r"index .*ix was written with \(its sha256 differs"):
    cli.main(["retrieve", "--dense", str(index), "--queries", queries_file(tmp_path),
              "--output", str(tmp_path / "out.run")])
  (index / "vectors.npy").write_bytes((index / "vectors.npy").read_bytes()[:100])  # cut
  with pytest.raises(SystemExit, match="vectors.npy is not the file"):
    cli.main(["retrieve", "--dense", str(index), "--queries", queries_file(tmp_path),
              "--output", str(tmp_path / "out.run")])


def test_a_resumed_index_refuses_a_shard_of_other_texts(tmp_path):
  from t5rank.retrieval.dense import encode_corpus
  from t5rank.retrieval.encoders import load_encoder

  encoder = load_encoder(embeddings(tmp_path / "emb"))
  texts, docids = list(TEXTS.values()), list(TEXTS)
  work = str(tmp_path / "ix.partial")
  whole = encode_corpus(encoder, texts, work, shard_size=2, docids=docids, progress=False)
  os.replace(os.path.join(work, "shard-00001.npz"), os.path.join(work, "shard-00000.npz"))
  with pytest.raises(ValueError, match="shard-00000.npz holds the vectors of other texts than "
                     "this shard's"):
    encode_corpus(encoder, texts, work, shard_size=2, docids=docids, progress=False)
  os.remove(os.path.join(work, "shard-00000.npz"))  # as the message says: encoded again
  np.testing.assert_array_equal(
      encode_corpus(encoder, texts, work, shard_size=2, docids=docids, progress=False), whole)


def test_a_truncated_vectors_file_is_named(tmp_path):
  emb = embeddings(tmp_path / "emb")
  path = os.path.join(emb, "vectors.npy")
  with open(path, "rb") as f:
    head = f.read(90)
  with open(path, "wb") as f:
    f.write(head)
  with pytest.raises(SystemExit, match=r"t5rank index: .*emb/vectors.npy: not a readable .npy "
                     r"array"):
    cli.main(["index", "--encoder", emb, "--corpus", corpus_file(tmp_path), "--output",
              str(tmp_path / "ix")])


# ------------------------------------------------------------- files tied to their checkpoint


def dual_encoder_checkpoint(tmp_path) -> str:
  from t5rank.models import dual_encoder
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.models.words import WORDS_FILE
  import jax

  emb = embeddings(tmp_path / "emb")
  config = dual_encoder.dual_encoder_config(emb, embedding_dim=6)
  params = dual_encoder.init_params(config, jax.random.PRNGKey(0))
  path = tmp_path / "de"
  path.mkdir()
  WordVocabulary.load(emb).save(str(path / WORDS_FILE))
  save_checkpoint(str(path), params, config, {"model": "dual_encoder"})
  return str(path)


def test_a_dual_encoders_word_list_is_checked_against_its_config(tmp_path):
  from t5rank.models.dual_encoder import DualEncoderConfig
  from t5rank.models.words import load_words
  from t5rank.retrieval.encoders import load_encoder

  checkpoint = dual_encoder_checkpoint(tmp_path)
  words = os.path.join(checkpoint, "words.tsv")
  lines = open(words).readlines()
  with open(words, "w") as f:
    f.writelines(lines[:-1])  # a cut list
  with pytest.raises(ValueError, match=r"words.tsv is not the file the checkpoint .*de was "
                     r"written with \(its size differs"):
    load_encoder(checkpoint)  # the manifest sees it first
  with open(os.path.join(checkpoint, "config.json")) as f:
    config = DualEncoderConfig.from_json(f.read())
  with pytest.raises(ValueError, match=rf"words.tsv \({len(lines) - 1 + 2} ids, sha256 \w+\) is "
                     rf"not the word list this DualEncoderConfig was built with "
                     rf"\({len(lines) + 2} ids"):
    load_words(config, checkpoint)  # and the config behind it


def test_a_broken_config_and_a_checkpoint_of_another_model_are_named(tmp_path):
  from t5rank.retrieval.encoders import load_encoder

  checkpoint = dual_encoder_checkpoint(tmp_path)
  with pytest.raises(SystemExit, match=r"t5rank ensemble: .*de is a dual_encoder checkpoint, not "
                     r"a tk one"):
    cli.main(["ensemble", checkpoint, checkpoint, "--output", str(tmp_path / "ens")])
  with open(os.path.join(checkpoint, "config.json"), "w") as f:
    f.write('{"vocab_size": 12,')
  with pytest.raises(ValueError, match=r"de/config.json: not a DualEncoderConfig \(JSONDecodeError"):
    load_encoder(checkpoint)


# --------------------------------------------------------------------------- training and gin


@pytest.mark.parametrize("flags, message", [
    (["--gin.MODEL_DIR={dir}", "--gin.TRAIN_STEP=5"],
     "--gin.TRAIN_STEP: no gin file defines the macro TRAIN_STEP; did you mean TRAIN_STEPS?"),
    (["--gin.TRAIN_STEPS=5"], "MODEL_DIR is required by the gin files: give --gin.MODEL_DIR=VALUE"),
    (["--gin.MODEL_DIR={dir}", "--gin.TRAIN_STEPS=0"],
     r"--gin.TRAIN_STEPS: TRAIN_STEPS must be a whole number of at least 1, got 0$"),
    (["--gin.MODEL_DIR={dir}", "--gin.TRAIN_STEPS=-1"],
     r"--gin.TRAIN_STEPS: TRAIN_STEPS must be a whole number of at least 1, got -1$"),
    # #58: `abc` failed with a traceback after the data was prepared; 2.5 trained 3 steps
    (["--gin.MODEL_DIR={dir}", "--gin.TRAIN_STEPS=abc"],
     r"--gin.TRAIN_STEPS: TRAIN_STEPS must be a whole number of at least 1, got 'abc'$"),
    (["--gin.MODEL_DIR={dir}", "--gin.TRAIN_STEPS=2.5"],
     r"--gin.TRAIN_STEPS: TRAIN_STEPS must be a whole number of at least 1, got 2.5$"),
    (["--gin.MODEL_DIR={dir}", "--gin.BATCH_SIZE=True"],
     r"--gin.BATCH_SIZE: BATCH_SIZE must be a whole number of at least 1, got True$"),
    (["--gin.MODEL_DIR={dir}", "--gin.LOG_EVERY=0"],
     r"--gin.LOG_EVERY: LOG_EVERY must be a whole number of at least 1, got 0$"),
    (["--gin.MODEL_DIR={dir}", "--gin.SEED=1e3"],
     r"--gin.SEED: SEED must be a whole number of at least 0, got 1000.0$"),
])
def test_train_refuses_unknown_macros_no_steps_and_a_missing_model_dir(tmp_path, flags, message):
  gin_file = "gin/experiments/tiny_insuranceqa_cpu.gin"  # found in the package, from any directory
  with pytest.raises(SystemExit, match=f"^t5rank train: {message}"):
    cli.main(["train", f"--gin_file={gin_file}",
              *(f.format(dir=tmp_path / "run") for f in flags)])
  assert not (tmp_path / "run").exists()


def test_a_gin_syntax_error_names_the_file_and_line(tmp_path):
  (tmp_path / "bad.gin").write_text("TRAIN_STEPS = 10\nMODEL_DIR = \n")
  with pytest.raises(SystemExit, match=r"^t5rank train: .*bad.gin:2: gin syntax error: Unable to "
                     r"parse value.$"):
    cli.main(["train", f"--gin_file={tmp_path / 'bad.gin'}"])
  (tmp_path / "bad.gin").write_text("TRAIN_STEPS = 10\nMODEL_DIR = (\n")
  with pytest.raises(SystemExit, match=r"^t5rank train: gin syntax error: EOF in multi-line "
                     r"statement at line 3 of .*bad.gin \(or a file it includes\)$"):
    cli.main(["train", f"--gin_file={tmp_path / 'bad.gin'}"])


def test_whole_number_macros_are_checked_before_any_work(tmp_path, monkeypatch):
  # the check comes right after gin is read: the trainer (which prepares the data) is never called
  from t5rank.commands import train

  monkeypatch.setattr(train, "train_configured", lambda: pytest.fail("the trainer was called"))
  (tmp_path / "steps.gin").write_text("include 'gin/experiments/tiny_insuranceqa_cpu.gin'\n"
                                      "TRAIN_STEPS = 2.5\n")
  with pytest.raises(SystemExit, match=r"^t5rank train: TRAIN_STEPS in the gin files: TRAIN_STEPS "
                     r"must be a whole number of at least 1, got 2.5$"):
    cli.main(["train", f"--gin_file={tmp_path / 'steps.gin'}",
              f"--gin.MODEL_DIR={tmp_path / 'run'}"])
  assert not (tmp_path / "run").exists()


def test_a_gin_import_of_a_missing_module_is_one_line_naming_the_file(tmp_path):
  # #58: a traceback ending in gin's three-line "In file" addition
  (tmp_path / "bad.gin").write_text("TRAIN_STEPS = 10\nimport nonexistent_module\n")
  (tmp_path / "top.gin").write_text(f"include '{tmp_path / 'bad.gin'}'\n")
  for top in ("bad.gin", "top.gin"):  # the file with the line, also when it is included
    with pytest.raises(SystemExit, match=r"^t5rank train: .*/bad.gin:2: gin cannot import "
                       r"nonexistent_module: no such module in this Python \(a misspelling, or a "
                       r"package to install\)$"):
      cli.main(["train", f"--gin_file={tmp_path / top}"])


def test_a_model_dir_of_another_run_is_refused_before_its_files_are_touched(tmp_path):
  import train_fixtures as fx
  from test_train import run_kwargs
  from t5rank.training import trainer as train_lib

  model_dir = tmp_path / "run"
  train_lib.train(**run_kwargs(str(model_dir), train_steps=3),
                  record={"config.gin": "the first run"})
  before = {name: (model_dir / name).read_bytes() for name in ("config.json", "config.gin")}
  with pytest.raises(ValueError, match=r"holds step 3 of a run with other settings \(batch_size: "
                     r"checkpoint 4 vs now 8"):
    train_lib.train(**run_kwargs(str(model_dir), train_steps=6, batch_size=8),
                    record={"config.gin": "the second run"})
  assert {name: (model_dir / name).read_bytes() for name in before} == before
  del fx


def test_a_tk_run_refuses_a_monot5_checkpoint_to_start_from(tmp_path):
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.models.tk import tk_config
  from t5rank.testing import micro_config, random_params
  from t5rank.training.pairwise import PairwiseTK
  from t5rank.training.trainer import Init
  import jax

  config = micro_config()
  save_checkpoint(str(tmp_path / "monot5"), random_params(config, std=0.2), config)
  tk = PairwiseTK(tk_config(embeddings(tmp_path / "emb"), embedding_dim=6))
  with pytest.raises(ValueError, match=r"monot5 is a monot5 checkpoint, not a tk one"):
    tk.init_params(jax.random.PRNGKey(0), Init(checkpoint=str(tmp_path / "monot5")))


# ----------------------------------------------------------------------- one line, not a crash


def test_hnsw_links_out_of_range_are_refused_and_a_huge_ef_search_is_capped(tmp_path, capsys):
  emb = embeddings(tmp_path / "emb")
  for links in ("1", "1000000000"):
    with pytest.raises(SystemExit) as usage:
      cli.main(["index", "--encoder", emb, "--corpus", corpus_file(tmp_path), "--output",
                str(tmp_path / "ix"), "--hnsw", links])
    assert usage.value.code == 2 and "expected 0 (no graph) or M from 2 to 256" in \
        capsys.readouterr().err
  assert cli.main(["index", "--encoder", emb, "--corpus", corpus_file(tmp_path), "--output",
                   str(tmp_path / "ix"), "--hnsw", "2"]) == 0
  out = tmp_path / "out.run"
  assert cli.main(["retrieve", "--dense", str(tmp_path / "ix"), "--queries", queries_file(tmp_path),
                   "--output", str(out), "--search", "hnsw", "--ef-search", "1000000000",
                   "--depth", "2"]) == 0
  assert len(out.read_text().splitlines()) == 4


def test_bm25_candidates_missing_from_the_corpus_are_named(tmp_path):
  (tmp_path / "cand.run").write_text("q1 Q0 d1 1 1.0 x\nq1 Q0 d9 2 0.5 x\n")
  with pytest.raises(SystemExit, match=r"t5rank retrieve: .*cand.run: query 'q1': 1 candidate "
                     r"document\(s\) are not in the corpus, e.g. 'd9'"):
    cli.main(["retrieve", "--corpus", corpus_file(tmp_path), "--queries", queries_file(tmp_path),
              "--candidates", str(tmp_path / "cand.run"), "--output", str(tmp_path / "out.run")])


def test_pairs_files_with_a_byte_order_mark_read_and_latin1_is_named(tmp_path):
  texts = tmp_path / "texts.tsv"
  texts.write_text("a\tcafé au lait\nb\tcoffee with milk\n")
  (tmp_path / "bom.tsv").write_bytes("\ufeffa\tb\n".encode())
  assert cli.main(["pairs-to-retrieval", "--pairs", str(tmp_path / "bom.tsv"), "--texts",
                   str(texts), "--output", str(tmp_path / "task")]) == 0
  assert (tmp_path / "task" / "qrels.txt").read_text() == "a 0 a 1\na 0 b 1\nb 0 a 1\nb 0 b 1\n"
  (tmp_path / "latin1.tsv").write_bytes("a\tb\nb\tcaf\xe9\n".encode("latin-1"))
  with pytest.raises(SystemExit, match=r"t5rank pairs-to-retrieval: .*latin1.tsv:2: undecodable "
                     r"bytes \(expected UTF-8\)"):
    cli.main(["pairs-to-retrieval", "--pairs", str(tmp_path / "latin1.tsv"), "--texts",
              str(texts), "--output", str(tmp_path / "task2")])


def test_the_demos_results_are_json_without_nan():
  from t5rank.pipelines.stages import finite

  results = {"dual_encoder": {"validation_p@1": float("nan")}, "mean": [0.5, float("inf")]}
  assert json.loads(json.dumps(finite(results), allow_nan=False)) == {
      "dual_encoder": {"validation_p@1": None}, "mean": [0.5, None]}


def test_retrieve_dense_prints_no_orbax_info(tmp_path, caplog):
  # #58: `retrieve --dense` printed ten lines of orbax INFO (through absl's logger) while it read
  # the dual encoder's checkpoint
  import logging

  checkpoint = dual_encoder_checkpoint(tmp_path)
  assert cli.main(["index", "--encoder", checkpoint, "--corpus", corpus_file(tmp_path),
                   "--output", str(tmp_path / "ix")]) == 0
  (tmp_path / "q.tsv").write_text("q1\tcar insurance\n")
  caplog.clear()
  caplog.set_level(logging.INFO)
  assert cli.main(["retrieve", "--dense", str(tmp_path / "ix"), "--queries",
                   str(tmp_path / "q.tsv"), "--output", str(tmp_path / "r.run"), "--depth", "2"]) == 0
  assert [r.getMessage() for r in caplog.records if r.name == "absl"] == []
  assert (tmp_path / "r.run").read_text().count("\n") == 2
