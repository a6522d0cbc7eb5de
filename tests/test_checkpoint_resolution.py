"""A checkpoint is resolved once (`t5rank.checkpoints.resolved`): one read of its metadata.json in a
whole `t5rank score`, the family from its own files (a Hugging Face directory's `t5rank.json`), and
the families a command offers from the registry."""

from __future__ import annotations

import builtins
import json
import os

import pytest

from t5rank import cli
from t5rank.checkpoints.resolved import resolve
from t5rank.models import registry
from t5rank.models.duot5 import DuoT5
from t5rank.models.loading import load_reranker
from t5rank.models.t5_weights import save_checkpoint
from t5rank.testing import micro_config, random_params


@pytest.fixture
def job(tmp_path):
  """Queries, a corpus and a BM25-like run of two queries and four documents in tmp_path."""
  (tmp_path / "q.tsv").write_text("q1\tlife policy term\nq2\tcar rate cover\n")
  (tmp_path / "c.tsv").write_text("".join(f"d{i}\tpolicy {'term ' * i}life car rate {i}\n"
                                          for i in range(4)))
  (tmp_path / "bm25.run").write_text("".join(
      f"{q} Q0 d{i} {i + 1} {10.0 - i} bm25\n" for q in ("q1", "q2") for i in range(4)))
  return tmp_path


def count_metadata_reads(monkeypatch) -> list[str]:
  """The paths of every metadata.json opened from now on (builtins.open wrapped)."""
  reads, real_open = [], builtins.open

  def counting_open(file, *args, **kwargs):
    if isinstance(file, (str, os.PathLike)) and os.path.basename(os.fspath(file)) == "metadata.json":
      reads.append(os.fspath(file))
    return real_open(file, *args, **kwargs)

  monkeypatch.setattr(builtins, "open", counting_open)
  return reads


@pytest.mark.parametrize("family", ["monot5", "duot5", "shipped:tk"])
def test_one_score_reads_metadata_json_once(job, monkeypatch, family):
  if family.startswith("shipped:"):
    checkpoint = family
  else:
    config = micro_config()
    checkpoint = str(job / family)
    save_checkpoint(checkpoint, random_params(config, std=0.5), config,
                    {"model": family, "target_words": "true_false",
                     "feature_lengths": {"inputs": 64}})
  reads = count_metadata_reads(monkeypatch)
  assert cli.main(["score", "--checkpoint", checkpoint, "--queries", str(job / "q.tsv"),
                   "--corpus", str(job / "c.tsv"), "--run", str(job / "bm25.run"),
                   "--window", "0", "-o", str(job / "out.run")]) == 0
  assert len(reads) == 1, reads
  assert os.path.getsize(job / "out.run") > 0


def test_a_hugging_face_directory_s_family_comes_from_its_files(tmp_path):
  from t5rank.models.t5_weights.hf import save_hf_checkpoint

  config = micro_config()
  save_hf_checkpoint(str(tmp_path / "hf"), random_params(config, std=0.2), config)
  plain = resolve(str(tmp_path / "hf"))
  assert (plain.format, plain.family, plain.family_stated) == ("hf", "monot5", False)
  assert plain.hf_config["model_type"] == "t5" and plain.metadata == {}
  (tmp_path / "hf" / "t5rank.json").write_text(json.dumps({"model": "duot5", "max_length": 48}))
  duo = resolve(str(tmp_path / "hf"))
  assert (duo.family, duo.family_stated, duo.max_length) == ("duot5", True, 48)
  reranker, _ = load_reranker(duo)
  assert isinstance(reranker, DuoT5) and reranker.max_length == 48
  with pytest.raises(ValueError, match=r"is a duot5 checkpoint \(its files say so\)"):
    load_reranker(str(tmp_path / "hf"), model="monot5")


def test_a_resolved_checkpoint_is_passed_on_as_it_is(tmp_path):
  config = micro_config()
  save_checkpoint(str(tmp_path / "m"), random_params(config, std=0.2), config, {"model": "duot5"})
  checkpoint = resolve(str(tmp_path / "m"))
  assert resolve(checkpoint) is checkpoint
  assert (checkpoint.name, checkpoint.path, checkpoint.format) == (str(tmp_path / "m"),) * 2 + (
      "native",)
  assert checkpoint.metadata == {"model": "duot5"} and checkpoint.target_words is None


def _reranker_choices(command: str) -> list[str]:
  parser = cli.build_parser()
  subparsers = next(a for a in parser._actions if a.dest == "command")
  action = next(a for a in subparsers.choices[command]._actions if a.dest == "reranker")
  return list(action.choices)


def test_the_families_a_command_offers_are_the_registry_s():
  from t5rank.models.config import T5Config

  assert _reranker_choices("score") == _reranker_choices("serve") == registry.names()
  assert set(registry.names()) >= {"monot5", "duot5", "tk", "dual_encoder"}
  assert _reranker_choices("convert") == sorted(f.name for f in registry.families()
                                                if f.config is T5Config) == ["duot5", "monot5",
                                                                             "rankt5"]
