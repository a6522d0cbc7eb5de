"""Inputs past max_length: t5rank cuts the document (the query, `Relevant:` and EOS always read);
`truncation="input"` cuts the whole input as pygaggle does, with transformers' T5 tokenizer
(truncation=True, max_length=512). tests/golden/hf_truncation.json (scripts/make_hf_goldens.py,
transformers 4.57.1 and torch) holds that tokenizer's ids of a short and a 613-token monoT5 input
and the log P(true) of tests/golden/hf_duot5's tiny T5 (T5's vocabulary) on them."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import t5rank
from t5rank import cli
from t5rank.data.readers import read_run
from t5rank.models.vocab import EOS_ID

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
with open(os.path.join(GOLDEN, "hf_truncation.json")) as f:
  REFERENCE = json.load(f)
QUERY, SHORT, LONG = (REFERENCE["query"], REFERENCE["documents"]["short"],
                      REFERENCE["documents"]["long"])


@pytest.fixture(scope="module")
def rankers():
  checkpoint = os.path.join(GOLDEN, "hf_duot5")  # read as a monoT5: any T5 is one
  return {cut: t5rank.load(checkpoint, truncation=cut, max_length=512)
          for cut in ("document", "input")}


def test_input_truncation_is_the_hugging_face_computation(rankers):
  assert LONG["whole_input_tokens"] > 600 and len(LONG["ids"]) == 512  # cut by transformers
  pygaggle, ours = rankers["input"], rankers["document"]
  documents = [SHORT["document"], LONG["document"]]
  assert pygaggle.reranker.encode([QUERY] * 2, documents) == [SHORT["ids"], LONG["ids"]]
  scores = pygaggle.predict([(QUERY, d) for d in documents])
  np.testing.assert_allclose(scores, [SHORT["log_p_true"], LONG["log_p_true"]], rtol=0, atol=1e-5)
  # t5rank's own cut: the same below 512 tokens; past it, the document cut and `Relevant:` kept
  short, long = ours.reranker.encode([QUERY] * 2, documents)
  relevant = ours.reranker.vocab.encode("Relevant:")
  assert short == SHORT["ids"] and len(long) == 512 and long != LONG["ids"]
  assert long[-len(relevant) - 1:] == relevant + [EOS_ID]
  assert LONG["ids"][-len(relevant) - 1:] != relevant + [EOS_ID]
  default = ours.predict([(QUERY, d) for d in documents])
  assert abs(default[0] - SHORT["log_p_true"]) < 1e-5
  assert abs(default[1] - LONG["log_p_true"]) > 1e-4  # 100 times the tolerance: not a vacuous test


def test_score_and_serve_take_truncation(rankers, tmp_path):
  (tmp_path / "q.tsv").write_text(f"q\t{QUERY}\n")
  (tmp_path / "c.tsv").write_text(f"long\t{LONG['document']}\n")
  (tmp_path / "c.run").write_text("q long\n")
  assert cli.main(["score", "--checkpoint", os.path.join(GOLDEN, "hf_duot5"), "--queries",
                   str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"), "--run",
                   str(tmp_path / "c.run"), "--window", "0", "--max-length", "512",
                   "--truncation", "input", "-o", str(tmp_path / "out.run")]) == 0
  [(_, score)] = read_run(str(tmp_path / "out.run"))["q"]
  assert abs(score - LONG["log_p_true"]) < 1e-5
  assert "the whole input cut" in rankers["input"].reranker.describe()
  assert rankers["input"].reranker.fingerprint()["truncation"] == "input"
  assert "truncation" not in rankers["document"].reranker.fingerprint()  # old jobs still resume
  serve = cli.build_parser().parse_args(["serve", "--checkpoint", "x", "--truncation", "input"])
  assert serve.truncation == "input"
  with pytest.raises(ValueError, match="^truncation must be one of document, input, got 'end'"):
    t5rank.load("shipped:monot5", truncation="end")


def test_duot5_input_truncation_cuts_pygaggles_string():
  duo = t5rank.load("shipped:duot5", truncation="input", max_length=64)
  first, second = "life cover " * 40, "car cover " * 40
  [ids] = duo.reranker.encode([QUERY], [(first, second)], [(9.0, 3.0)])
  text = (f"Query: {QUERY} BM25: 9 Document0: {first.strip()} BM25: 3 Document1: "
          f"{second.strip()} Relevant:")
  assert ids == duo.reranker.vocab.encode(text)[:63] + [EOS_ID]


def test_families_that_read_no_template_refuse_it():
  with pytest.raises(ValueError, match="TK checkpoint; the options truncation are not its own"):
    t5rank.load("shipped:tk", truncation="input")
