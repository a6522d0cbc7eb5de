"""Hub ids wherever a checkpoint is taken: `ORG/NAME[@REVISION]` resolved by huggingface_hub from a
cache in the Hub's own layout (`t5rank.testing.make_hub_cache`), offline; a local directory of the
same name wins; an id neither here nor cached is one line saying how to fetch it."""

from __future__ import annotations

import os

import pytest

from t5rank import cli
from t5rank.checkpoints.locate import HubError, local_path
from t5rank.data.readers import read_run
from t5rank.testing import make_hub_cache

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "hf_duot5")  # T5's vocabulary
REPO = "castorini/monot5-tiny-test"
REVISION = "a" * 40


@pytest.fixture
def hub(tmp_path, monkeypatch):
  cache = tmp_path / "hub"
  files = {name: os.path.join(GOLDEN, name) for name in ("config.json", "model.safetensors")}
  snapshot = make_hub_cache(str(cache), REPO, files, revision=REVISION, refs=("main", "v1"))
  monkeypatch.setenv("HF_HUB_CACHE", str(cache))
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  monkeypatch.chdir(tmp_path)
  return snapshot


def test_a_hub_id_resolves_to_its_cached_snapshot(hub):
  assert local_path(REPO) == hub
  assert local_path(f"{REPO}@v1") == hub  # a branch
  assert local_path(f"{REPO}@{REVISION}") == hub  # a commit
  assert local_path("shipped:monot5").endswith(os.path.join("shipped", "monot5"))


def test_hf_home_is_honoured(hub, tmp_path, monkeypatch):
  monkeypatch.delenv("HF_HUB_CACHE")
  monkeypatch.setenv("HF_HOME", str(tmp_path))
  os.rename(tmp_path / "hub", tmp_path / "hub2")
  with pytest.raises(HubError, match="nor in the Hugging Face cache"):
    local_path(REPO)
  os.rename(tmp_path / "hub2", tmp_path / "hub")
  assert local_path(REPO) == hub


def test_a_local_directory_of_the_same_name_wins(hub, tmp_path):
  (tmp_path / "castorini" / "monot5-tiny-test").mkdir(parents=True)
  assert local_path(REPO) == REPO


def test_an_id_neither_local_nor_cached_offline_is_one_line(hub, capsys):
  with pytest.raises(HubError) as e:
    local_path("castorini/not-here@v2")
  message = str(e.value)
  assert "castorini/not-here@v2 is neither a local directory nor in the Hugging Face cache" in \
      message and "HF_HUB_OFFLINE" in message and "hf download castorini/not-here" in message
  assert "\n" not in message
  with pytest.raises(SystemExit) as e:
    cli.main(["score", "--checkpoint", "castorini/not-here", "--queries", "q", "--corpus", "c",
              "--run", "r", "-o", "o.run"])
  assert "HF_HUB_OFFLINE" in str(e.value.code)


def test_score_and_convert_take_a_hub_id(hub, tmp_path):
  (tmp_path / "q.tsv").write_text("q1\tlife policy term\n")
  (tmp_path / "c.tsv").write_text("d1\tpolicy life\nd2\tcar rate\nd3\tterm life policy\n")
  (tmp_path / "r.run").write_text("q1 Q0 d1 1 3 x\nq1 Q0 d2 2 2 x\nq1 Q0 d3 3 1 x\n")
  common = ["--queries", "q.tsv", "--corpus", "c.tsv", "--run", "r.run", "--window", "0"]
  assert cli.main(["score", "--checkpoint", REPO, *common, "-o", "hub.run"]) == 0
  assert cli.main(["score", "--checkpoint", GOLDEN, *common, "-o", "dir.run"]) == 0
  assert read_run("hub.run") == read_run("dir.run")
  assert cli.main(["convert", "--input", f"{REPO}@v1", "--to", "native", "-o", "native"]) == 0
  assert cli.main(["score", "--checkpoint", "native", *common, "-o", "native.run"]) == 0
  assert read_run("native.run") == read_run("dir.run")


def test_an_output_inside_a_cached_snapshot_is_refused(hub, capsys):
  with pytest.raises(SystemExit) as e:
    cli.main(["convert", "--input", REPO, "--to", "hf", "-o", os.path.join(hub, "out")])
  assert "lies inside --input" in str(e.value.code)


def test_names_meant_as_local_paths_never_reach_the_hub(hub, tmp_path, monkeypatch):
  import huggingface_hub

  def no_network(*args, **kwargs):
    raise AssertionError("asked the Hub")

  monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
  (tmp_path / "base").mkdir()
  (tmp_path / "base" / "model.ckpt-999900.index").write_text("")
  assert local_path("base/model.ckpt-999900") == "base/model.ckpt-999900"  # a TF prefix
  assert local_path("base/missing") == "base/missing"  # under a directory that exists here
  assert local_path("./a/b") == "./a/b"


def test_a_stage_takes_a_hub_id_at_a_revision(hub):
  from t5rank.pipelines.cascade_spec import parse_stage

  assert parse_stage(f"{REPO}@v1").checkpoint == f"{REPO}@v1"
  stage = parse_stage(f"duo={REPO}@v1@10")
  assert (stage.name, stage.checkpoint, stage.depth) == ("duo", f"{REPO}@v1", 10)
