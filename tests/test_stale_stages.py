"""Stale stages (issue #66, "Stale stages (silently wrong)"): a stage of `t5rank rerank` is reused
only when it was made from the same inputs and settings and is still the output it stamped; a
second writer of the same cascade is refused; a damaged stamp is named. One test per finding, each
failing before its fix. Tiny models (`tiny`: micro monoT5 and duoT5), tiny inputs."""

from __future__ import annotations

import json
import os

import pytest

from t5rank import cli
from t5rank.data.readers import read_run
from t5rank.reuse import cached
from t5rank.testing import micro_config, random_params
from test_nothing_lost_3 import fail, tiny  # noqa: F401 (a fixture)


def rerank(tiny, checkpoint: str = "mono", output: str = "cascade") -> list[str]:
  """`t5rank rerank` of `checkpoint` (a directory in `tiny`) over the top 4 of tiny's BM25 run."""
  return ["rerank", "--queries", str(tiny / "q.tsv"), "--corpus", str(tiny / "c.tsv"), "--run",
          str(tiny / "bm25.run"), "--stage", f"mono={tiny / checkpoint}@4", "-o",
          str(tiny / output)]


# ------------------------------------------------------------- 12: the checkpoint's settings


@pytest.mark.parametrize("before, after", [({"max_length": 64}, {"max_length": 16}),
                                           ({}, {"target_words": ["false", "true"]}),
                                           ({"bm25_in_input": True}, {"bm25_in_input": False})])
def test_a_stage_is_scored_again_when_the_checkpoints_scoring_settings_change(tiny, capsys,
                                                                              before, after):
  from t5rank.models.t5_weights.hf import save_hf_checkpoint

  config = micro_config()
  save_hf_checkpoint(str(tiny / "hf"), random_params(config, std=0.5), config)
  (tiny / "hf" / "t5rank.json").write_text(json.dumps(before))
  assert cli.main(rerank(tiny, "hf")) == 0
  before = read_run(str(tiny / "cascade" / "01_mono.run"))
  (tiny / "hf" / "t5rank.json").write_text(json.dumps(after))
  capsys.readouterr()
  assert cli.main(rerank(tiny, "hf")) == 0
  assert "reused" not in capsys.readouterr().out
  after = read_run(str(tiny / "cascade" / "01_mono.run"))
  assert after != before
  assert cli.main(rerank(tiny, "hf", output="fresh")) == 0  # what these settings give
  assert read_run(str(tiny / "fresh" / "01_mono.run")) == after


def test_the_stage_and_the_scorer_are_keyed_on_one_scoring_key(tiny, monkeypatch):
  """What `t5rank score` keys its shards on is what a stage's stamp holds (`scoring_key`), so the
  two cannot drift apart."""
  from t5rank.ranking import shards

  manifests = []
  opened = shards.open_shard_directory
  monkeypatch.setattr(shards, "open_shard_directory",
                      lambda directory, manifest, **kw: (manifests.append(manifest),
                                                         opened(directory, manifest, **kw)))
  assert cli.main(rerank(tiny)) == 0
  stamp = json.loads((tiny / "cascade" / "01_mono.run.json").read_text())
  assert stamp["scoring"] == manifests[0]["settings"]
  assert stamp["scoring"]["max_length"] and stamp["scoring"]["targets"]


# ---------------------------------------------------- 13: the output is what its stamp says


@pytest.mark.parametrize("change", ["emptied", "truncated at a line boundary", "edited by hand"])
def test_a_file_changed_after_its_stamp_is_made_anew(tmp_path, capsys, change):
  path, built = str(tmp_path / "a.run"), []

  def build():
    built.append(1)
    (tmp_path / "a.run").write_text("q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5 t\n")

  assert cached(path, {"model": "m"}, build, what="a run") is False
  lines = (tmp_path / "a.run").read_text().splitlines(keepends=True)
  (tmp_path / "a.run").write_text({"emptied": "", "truncated at a line boundary": lines[0],
                                   "edited by hand": lines[0].replace("2.5", "0.5") + lines[1]
                                   }[change])
  assert cached(path, {"model": "m"}, build, what="a run") is False and len(built) == 2
  assert "is not the file its stamp" in capsys.readouterr().out
  assert cached(path, {"model": "m"}, build, what="a run") is True and len(built) == 2


def test_an_emptied_stage_run_is_scored_again(tiny, capsys):
  assert cli.main(rerank(tiny)) == 0
  before = read_run(str(tiny / "cascade" / "01_mono.run"))
  (tiny / "cascade" / "01_mono.run").write_text("")
  capsys.readouterr()
  assert cli.main(rerank(tiny)) == 0
  assert "reused" not in capsys.readouterr().out
  assert read_run(str(tiny / "cascade" / "01_mono.run")) == before
  assert not json.loads((tiny / "cascade" / "results.json").read_text())["timings"][1].get("reused")


# ------------------------------------------------------------------ 14: one writer at a time


def test_a_second_rerank_into_the_same_directory_is_refused_naming_the_first(tiny, capsys,
                                                                           monkeypatch):
  from t5rank.pipelines import cascade

  score, second = cascade.score_candidates, []

  def first_scoring(*args, **kwargs):  # while the first command scores its stage: a second one
    if not second:
      second.append("started")
      second.append(fail(rerank(tiny), capsys))
    return score(*args, **kwargs)

  monkeypatch.setattr(cascade, "score_candidates", first_scoring)
  assert cli.main(rerank(tiny)) == 0
  assert f"being written by another t5rank process (pid {os.getpid()})" in second[1]
  assert str(tiny / "cascade") in second[1]
  assert len(read_run(str(tiny / "cascade" / "01_mono.run"))) == 2  # the first's, whole
  assert cli.main(rerank(tiny)) == 0  # the lock went with the first command


# ------------------------------------------------------------------- 15: a stamp not JSON


def test_a_stamp_that_is_not_json_is_named_in_one_line(tiny, capsys):
  assert cli.main(rerank(tiny)) == 0
  stamp = tiny / "cascade" / "01_mono.run.json"
  stamp.write_text('{"scoring": ')
  message = fail(rerank(tiny), capsys)
  assert f"{stamp}: not JSON" in message and "remove it" in message


def test_a_shard_manifest_that_is_not_json_is_named_in_one_line(tmp_path):
  from t5rank.ranking import shards

  (tmp_path / "out.shards").mkdir()
  (tmp_path / "out.shards" / shards.MANIFEST_FILE).write_text("{")
  with pytest.raises(ValueError, match=f"^{tmp_path / 'out.shards' / shards.MANIFEST_FILE}: not "
                                       "JSON"):
    shards.open_shard_directory(str(tmp_path / "out.shards"), {"fingerprint": "x"})


def test_a_teacher_json_that_is_not_json_is_named_in_one_line(tmp_path):
  """teacher.json, the stamp of a teacher directory (its `complete` reads it)."""
  from t5rank.data import teacher

  (tmp_path / teacher.TEACHER_FILE).write_text("{")
  with pytest.raises(ValueError, match=f"^{tmp_path / teacher.TEACHER_FILE}: not JSON"):
    teacher.read_teacher(str(tmp_path))
