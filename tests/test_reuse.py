"""Keyed reuse (`t5rank.reuse`) on hand-made outputs: a file reused by its stamp, the stamp gone
while the file is rewritten; a directory reused, resumed, or moved aside when its key differs, when
asked, or when damaged; a directory of resumable parts resumed or refused, naming what differs; and
the kinds that use it: the BM25 index and InsuranceQA's word embeddings (directories made whole),
the dense index's shards (resumable parts)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from t5rank.reuse import cached


def test_a_file_is_reused_by_its_stamp_which_is_gone_while_it_is_rewritten(tmp_path):
  path, built = str(tmp_path / "a.run"), []

  def build():
    assert not os.path.exists(path + ".json")  # removed before the output is rewritten
    built.append(1)
    (tmp_path / "a.run").write_text(f"{len(built)}\n")

  assert cached(path, {"model": "m", "depth": (1, 2)}, build, what="a run") is False
  assert json.loads((tmp_path / "a.run.json").read_text()) == {
      "model": "m", "depth": [1, 2], "output_file": {"bytes": 2, "sha256": hashlib.sha256(
          b"1\n").hexdigest()}}
  assert cached(path, {"model": "m", "depth": (1, 2)}, build, what="a run") is True
  assert cached(path, {"model": "m2", "depth": (1, 2)}, build, what="a run") is False
  assert cached(path, {"model": "m2", "depth": (1, 2)}, build, what="a run", rebuild=True) is False
  assert len(built) == 3 and not os.path.exists(path + ".previous")

  def killed():
    raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    cached(path, {"model": "m3"}, killed, what="a run")
  assert os.path.exists(path) and not os.path.exists(path + ".json")  # never reused again
  assert cached(path, {"model": "m2", "depth": (1, 2)}, build, what="a run") is False


def test_a_directory_is_reused_resumed_or_moved_aside(tmp_path):
  directory, calls = str(tmp_path / "teacher"), []

  def build():
    assert json.loads((tmp_path / "teacher" / "stage.json").read_text())["n"] == key["n"]
    calls.append(os.listdir(directory))
    (tmp_path / "teacher" / "done").write_text("ok" if len(calls) != 2 else "")

  def complete(path):
    done = os.path.join(path, "done")
    if os.path.exists(done) and open(done).read() == "damaged":
      raise ValueError("damaged")
    return os.path.exists(done) and open(done).read() == "ok"

  run = lambda **kw: cached(directory, key, build, what="scores", complete=complete, **kw)
  key = {"n": 1}
  assert run() is False and run() is True and len(calls) == 1
  key = {"n": 2}  # other inputs: the old directory moved aside
  assert run() is False and (tmp_path / "teacher.previous" / "done").is_file()
  assert run() is False and "done" in calls[-1]  # unfinished (the second build): resumed in place
  assert run() is True and run(rebuild=True) is False and len(calls) == 4
  (tmp_path / "teacher" / "done").write_text("damaged")
  assert run() is False and (tmp_path / "teacher.previous" / "done").read_text() == "damaged"


def test_a_directory_of_parts_is_resumed_or_refused_naming_what_differs(tmp_path):
  from t5rank.reuse import OtherJobError, changed, resume_directory

  work = str(tmp_path / "shards")
  key = {"model": "m", "shard_size": 8, "texts": ("a", "b")}
  assert resume_directory(work, key, manifest_file="manifest.json", what="shards") is False
  (tmp_path / "shards" / "part-0").write_text("done")
  assert resume_directory(work, key, manifest_file="manifest.json", what="shards") is True
  other = dict(key, shard_size=16, model="m2")
  assert changed(json.loads((tmp_path / "shards" / "manifest.json").read_text()), other) == [
      "model", "shard_size"]
  with pytest.raises(OtherJobError, match=r"holds shards of another job \(different model, "
                                          r"shard_size\); remove it"):
    resume_directory(work, other, manifest_file="manifest.json", what="shards")
  assert (tmp_path / "shards" / "part-0").read_text() == "done"  # refused: nothing touched
  assert resume_directory(work, other, manifest_file="manifest.json", what="shards",
                          replace=True) is False  # a job's own work: moved aside, not deleted
  assert (tmp_path / "shards.previous" / "part-0").read_text() == "done"
  assert not (tmp_path / "shards" / "part-0").exists()


def test_the_bm25_index_is_reused_by_its_key_and_another_moved_aside(tmp_path, monkeypatch):
  from t5rank.data.readers import Document
  from t5rank.retrieval import bm25

  corpus = {"1": Document("term life insurance"), "2": Document("car insurance covers theft")}
  builds = []
  build = bm25.BM25Index.build
  monkeypatch.setattr(bm25.BM25Index, "build", classmethod(
      lambda cls, *a, **k: builds.append(k) or build(*a, **k)))
  directory = str(tmp_path / "index")
  first = bm25.open_index(corpus, directory)
  again = bm25.open_index(corpus, directory)
  assert len(builds) == 1 and again.key == first.key  # read back, not built
  other = bm25.open_index(corpus, directory, k1=1.2)
  assert len(builds) == 2 and other.key["k1"] == 1.2
  assert json.loads((tmp_path / "index.previous" / bm25.KEY_FILE).read_text())["k1"] == 0.9
  mine = tmp_path / "mine"
  mine.mkdir()
  (mine / "notes.txt").write_text("mine")
  with pytest.raises(FileExistsError, match="is not a t5rank index; not overwriting it"):
    bm25.open_index(corpus, str(mine))
  assert (mine / "notes.txt").read_text() == "mine" and not (tmp_path / "mine.previous").exists()


def test_word_embeddings_are_reused_by_their_settings(tmp_path, monkeypatch):
  from t5rank.data import word_embeddings
  from t5rank.models.words import SETTINGS_FILE

  made = []

  def make(directory, texts, **settings):
    made.append(settings)
    os.makedirs(directory)
    (tmp_path / "words" / SETTINGS_FILE).write_text(json.dumps(
        {**settings, "words": word_embeddings.WORDS_RULE, "terms": 2}))

  monkeypatch.setattr(word_embeddings, "make_embeddings", make)
  monkeypatch.setattr(word_embeddings, "collection_texts", lambda language: ["a b", "b c"])
  directory = str(tmp_path / "words")
  assert word_embeddings.insuranceqa_embeddings(directory, dim=8, epochs=1) == directory
  word_embeddings.insuranceqa_embeddings(directory, dim=8, epochs=1)
  assert len(made) == 1
  word_embeddings.insuranceqa_embeddings(directory, dim=8, epochs=2)
  assert len(made) == 2 and made[1]["epochs"] == 2
  assert json.loads((tmp_path / "words.previous" / SETTINGS_FILE).read_text())["epochs"] == 1


def test_dense_shards_of_another_index_are_refused(tmp_path):
  import numpy as np

  from t5rank.retrieval import dense

  class Encoder:
    fingerprint, source, dim = "enc-1", "a test encoder", 2

    def encode(self, texts, side):
      return np.ones((len(texts), 2), np.float32) / np.sqrt(2)

  work = str(tmp_path / "work")
  vectors = dense.encode_corpus(Encoder(), ["a", "b", "c"], work, shard_size=2, progress=False)
  assert vectors.shape == (3, 2) and sorted(os.listdir(work))[1:] == [
      "shard-00000.npz", "shard-00001.npz"]
  np.testing.assert_array_equal(dense.encode_corpus(Encoder(), ["a", "b", "c"], work,
                                                    shard_size=2, progress=False), vectors)
  with pytest.raises(ValueError, match=r"holds the shards of a dense index of another job "
                                       r"\(different shard_size\)"):
    dense.encode_corpus(Encoder(), ["a", "b", "c"], work, shard_size=3, progress=False)
