"""One checkpoint value, one check (#68, item 3): a `t5rank rerank` stage resolves its checkpoint
once, checks its family once, hashes its parameters once and writes its run once, also when it
reads the first stage's BM25 scores; `t5rank score` checks its candidates and takes their
first-stage scores once, before the weights load. Each test counts the calls with spies around
the functions that do the work. Tiny models (`tiny`: micro monoT5 and duoT5), tiny inputs."""

from __future__ import annotations

import collections
import os

from t5rank import cli
from t5rank.checkpoints import resolved
from t5rank.data.readers import read_run
from t5rank.models import loading
from t5rank.models.t5_weights import save_checkpoint
from t5rank.pipelines import cascade
from t5rank.ranking import candidates, jobs, scorer
from t5rank.testing import micro_config, random_params
from test_nothing_lost_3 import fail, tiny  # noqa: F401 (a fixture)


def spy(monkeypatch, calls: collections.Counter, owner, name: str, key=None):
  """Replaces `owner.name` by a function that counts its calls in `calls` (under `key(*args)`,
  by default `name`) and does what it did."""
  original = getattr(owner, name)

  def counted(*args, **kwargs):
    calls[key(*args, **kwargs) if key else name] += 1
    return original(*args, **kwargs)

  monkeypatch.setattr(owner, name, counted)


def test_a_rerank_stage_resolves_checks_hashes_and_writes_once(tiny, monkeypatch):
  config = micro_config()  # a monoT5 that reads BM25 scores, after another stage: the case that
  save_checkpoint(str(tiny / "reads"), random_params(config, seed=2, std=0.5), config,
                  {"bm25_in_input": True})  # joined them by hand and wrote its run twice
  calls: collections.Counter = collections.Counter()
  spy(monkeypatch, calls, resolved, "local_path", key=lambda name: ("resolve", name))
  spy(monkeypatch, calls, resolved.Checkpoint, "check_family",
      key=lambda self, family: ("check_family", self.path))
  for owner in (scorer, cascade):  # the scorer's own hash and the cascade's
    spy(monkeypatch, calls, owner, "params_fingerprint")
  for owner in (scorer, cascade):  # whoever writes a run
    spy(monkeypatch, calls, owner, "write_run",
        key=lambda path, *a, **k: ("write", os.path.basename(path)))
  out = tiny / "cascade"
  assert cli.main(["rerank", "--queries", str(tiny / "q.tsv"), "--corpus", str(tiny / "c.tsv"),
                   "--run", str(tiny / "bm25.run"), "--stage", f"mono={tiny / 'mono'}@5",
                   "--stage", f"reads={tiny / 'reads'}@3", "--reranker", "monot5",
                   "-o", str(out)]) == 0
  assert calls == {("resolve", str(tiny / "mono")): 1, ("resolve", str(tiny / "reads")): 1,
                   ("check_family", str(tiny / "reads")): 1,  # the stage that names its family
                   "params_fingerprint": 2,
                   ("write", "00_bm25.run"): 1, ("write", "01_mono.run"): 1,
                   ("write", "02_reads.run"): 1}
  reads = read_run(str(out / "02_reads.run"))
  assert all(len(docs) == 6 for docs in reads.values())  # its top 3, then the rest below


def test_score_checks_its_candidates_once_before_the_weights_load(tiny, capsys, monkeypatch):
  calls: collections.Counter = collections.Counter()
  for owner in (candidates, scorer):  # where they are defined, and where the scorer calls them
    spy(monkeypatch, calls, owner, "check_candidates")
  for owner in (candidates, jobs):
    spy(monkeypatch, calls, owner, "first_stage_scores")
  spy(monkeypatch, calls, resolved.Checkpoint, "check_family")
  (tiny / "mono.run").write_text("".join(  # another stage's ranking: BM25's scores from their run
      f"{q} Q0 d{5 - i} {i + 1} {-0.1 * i} mono\n" for q in ("q1", "q2") for i in range(6)))
  score = ["score", "--checkpoint", "shipped:duot5", "--reranker", "duot5", "--queries",
           str(tiny / "q.tsv"), "--corpus", str(tiny / "c.tsv"), "--depth", "3", "--window",
           "0", "--first-stage-run", str(tiny / "bm25.run")]
  assert cli.main([*score, "--run", str(tiny / "mono.run"), "-o", str(tiny / "a.run")]) == 0
  assert calls == {"check_candidates": 1, "first_stage_scores": 1, "check_family": 1}
  assert all(sorted(d for d, _ in docs[:3]) == ["d3", "d4", "d5"]
             for docs in read_run(str(tiny / "a.run")).values())

  def no_loading(*args, **kwargs):
    raise AssertionError("the weights were loaded")

  monkeypatch.setattr(loading, "load_reranker", no_loading)  # refused before they load
  (tiny / "unknown.run").write_text("q1 Q0 nowhere 1 9.0 mono\n")
  message = fail([*score, "--run", str(tiny / "unknown.run"), "-o", str(tiny / "b.run")], capsys)
  assert "missing from" in message and "'nowhere'" in message
  assert calls["check_candidates"] == 2 and not (tiny / "b.run").exists()
