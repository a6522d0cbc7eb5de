"""Scoring options declared once (#68 item 1): `t5rank score`'s and `t5rank serve`'s flags and
`t5rank.load`'s keywords come from `t5rank.ranking.options`; the one default that differs by use
(`window`) says so in every --help; one long document gets one score from the three doors given
the same options."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
import requests

import t5rank
from t5rank.ranking import options
from test_serve import OPTIONS, Running, checkpoint  # noqa: F401

SENTENCES = [f"Sentence {i} says that a term life policy pays {i} thousand dollars."
             for i in range(25)]
LONG = " ".join(SENTENCES)
QUERY = "what does a term life policy pay"


def test_the_window_default_differs_by_use_and_every_door_says_so():
  assert options.default("window", "corpus") == 10 and options.default("window", "service") == 0
  assert inspect.signature(t5rank.load).parameters["window"].default == 0
  assert "t5rank score`'s is 10" in " ".join(t5rank.load.__doc__.split())
  for command, here, other in (("score", "10", "0 for t5rank serve"),
                               ("serve", "0", "10 for t5rank score")):
    text = subprocess.run([sys.executable, "-m", "t5rank.cli", command, "--help"],
                          capture_output=True, text=True, timeout=120).stdout
    flat = " ".join(text.split())
    assert f"(default: {here} here; {other}" in flat, flat[flat.find("--window"):][:300]


def test_the_same_types_and_checks_everywhere():
  from t5rank.cli import build_parser

  parser = build_parser()
  for command in ("score", "serve"):
    with pytest.raises(SystemExit):
      parser.parse_args([command, "--checkpoint", "x", "--depth", "0"] +
                        (["--queries", "q", "--corpus", "c", "--run", "r", "-o", "o"]
                         if command == "score" else []))
  with pytest.raises(ValueError, match="depth"):
    t5rank.load("x", depth=0)
  with pytest.raises(ValueError, match="window"):
    t5rank.load("x", window=-1)
  with pytest.raises(ValueError, match="passages must be one of maxp"):
    t5rank.load("x", passages="best")


def test_one_long_document_gets_one_score_from_score_load_and_serve(checkpoint, tmp_path):  # noqa: F811
  ranker = t5rank.load(checkpoint, window=10, **OPTIONS)
  loaded = ranker.rank(QUERY, [LONG, SENTENCES[3]])
  (tmp_path / "q.tsv").write_text(f"q\t{QUERY}\n")
  (tmp_path / "c.tsv").write_text(f"long\t{LONG}\nshort\t{SENTENCES[3]}\n")
  (tmp_path / "r.run").write_text("q Q0 long 1 2.0 bm25\nq Q0 short 2 1.0 bm25\n")
  result = subprocess.run(
      [sys.executable, "-m", "t5rank.cli", "score", "--checkpoint", checkpoint, "--queries",
       str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
       str(tmp_path / "r.run"), "-o", str(tmp_path / "out.run"), "--window", "10",
       *[f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.items()]],
      capture_output=True, text=True, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert result.returncode == 0, result.stderr[-2000:]
  scored = {line.split()[2]: float(line.split()[4])
            for line in (tmp_path / "out.run").read_text().splitlines()}
  running = Running(ranker, warm_up=lambda r: {})
  try:
    running.wait_ready(30)
    served = requests.post(running.url + "/rerank", json={
        "query": QUERY, "texts": [LONG, SENTENCES[3]], "raw_scores": True}).json()
  finally:
    running.stop()
  by_index = {r["corpus_id"]: r["score"] for r in loaded}
  np.testing.assert_allclose([scored["long"], scored["short"]], [by_index[0], by_index[1]],
                             atol=1e-5)
  np.testing.assert_allclose([a["score"] for a in sorted(served, key=lambda a: a["index"])],
                             [by_index[0], by_index[1]], atol=1e-5)
  whole = t5rank.load(checkpoint, **OPTIONS).rank(QUERY, [LONG])[0]["score"]
  assert abs(whole - by_index[0]) > 1e-4  # the window option decides the long text's score
