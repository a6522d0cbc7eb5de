"""The stage cache (`t5rank.pipelines.stage_cache.cached`) on hand-made outputs: a file reused by
its stamp, the stamp gone while the file is rewritten; a directory reused, resumed, or moved aside
when its key differs, when asked, or when damaged."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from t5rank.pipelines.stage_cache import cached


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
