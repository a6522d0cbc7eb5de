"""BM25 and RM3 on hand-made corpora: scores checked against the formula by hand, the RM3 query
checked term by term, the index saved, reused and rebuilt, and the `t5rank retrieve` command."""

from __future__ import annotations

import math
import os

import pytest

from t5rank import cli
from t5rank.data.readers import Document, read_run
from t5rank.data.analysis import tokenize
from t5rank.retrieval.bm25 import RM3, BM25Index, open_index, query_weights, search

K1, B = 0.9, 0.4
# Terms after stopping and stemming: d1 [cat chase mice] (3), d2 [dog chase cat cat chase dog] (6),
# d3 [bird sing] (2), d4 [mous small] (2): N = 4, avgdl = 13 / 4 = 3.25.
ANIMALS = {"d1": Document("Cats chase mice."),
           "d2": Document("Dogs chase cats and cats chase dogs."),
           "d3": Document("Birds sing."),
           "d4": Document("The mouse is small.")}


def _bm25(tf: int, df: int, n: int, length: int, avgdl: float) -> float:
  """Lucene's BM25: idf = ln(1 + (N - df + .5) / (df + .5)), times tf / (tf + k1 (1 - b + b |d| / avgdl))."""
  return math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf / (tf + K1 * (1 - B + B * length / avgdl))


def test_tokenize_english_and_chinese():
  assert tokenize("The cat's whiskers aren't running: U.S. policies!", "en") == [
      "cat", "whisker", "aren't", "run", "u", "s", "polici"]
  # CJK runs become overlapping bigrams, a lone CJK character stays, other words are lowercased.
  assert tokenize("人寿保险 是 Life 保单？", "zh") == ["人寿", "寿保", "保险", "是", "life", "保单"]
  # jieba's search mode: words, the dictionary words inside longer ones, no punctuation or spaces.
  assert tokenize("我们购买了人寿保险。Life Insurance! 租金保险涵盖什么？", "zh-jieba") == [
      "我们", "购买", "了", "人寿", "保险", "人寿保险", "life", "insurance", "租金", "保险", "涵盖", "什么"]
  with pytest.raises(ValueError, match="unknown language 'fr'"):
    tokenize("x", "fr")


def test_bm25_scores_by_hand():
  index = BM25Index.build(ANIMALS, k1=K1, b=B, language="en")
  # "cats" -> cat, df 2: idf = ln(1 + 2.5 / 2.5) = ln 2.
  # d2: tf 2, |d| 6: ln 2 * 2 / (2 + 0.9 * (0.6 + 0.4 * 6 / 3.25)) = 0.432593
  # d1: tf 1, |d| 3: ln 2 * 1 / (1 + 0.9 * (0.6 + 0.4 * 3 / 3.25)) = 0.370210
  ranked = search(index, "cats", k=10)
  assert [d for d, _ in ranked] == ["d2", "d1"]  # d3, d4 do not match and are not returned
  assert ranked[0][1] == pytest.approx(0.432593, abs=1e-6)
  assert ranked[1][1] == pytest.approx(0.370210, abs=1e-6)
  assert ranked[1][1] == pytest.approx(_bm25(1, 2, 4, 3, 3.25), rel=1e-6)
  # A repeated query term counts twice (Anserini's bag-of-words query); scores add over terms.
  assert search(index, "cats cats", k=1)[0][1] == pytest.approx(2 * 0.432593, abs=1e-6)
  assert search(index, "mouse", k=10) == [("d4", pytest.approx(_bm25(1, 1, 4, 2, 3.25), rel=1e-6))]
  assert search(index, "cats", k=1) == search(index, "cats", k=10)[:1]
  assert search(index, "unicorns", k=10) == []


def test_candidates_are_reranked_and_all_kept():
  index = BM25Index.build(ANIMALS, k1=K1, b=B, language="en")
  # d3 does not match but stays (last); ties at 0 are broken by document id.
  assert [d for d, _ in search(index, "cats", candidates=["d4", "d1", "d3"])] == ["d1", "d3", "d4"]
  with pytest.raises(ValueError, match="not in the corpus, e.g. 'zz'"):
    search(index, "cats", candidates=["d1", "zz"])


def test_index_saved_reused_and_rebuilt(tmp_path, monkeypatch):
  directory = str(tmp_path / "index")
  built = []
  real_build = BM25Index.build.__func__
  monkeypatch.setattr(BM25Index, "build",
                      classmethod(lambda cls, *a, **kw: built.append(kw) or real_build(cls, *a, **kw)))
  first = open_index(ANIMALS, directory, k1=K1, b=B)
  again = open_index(ANIMALS, directory, k1=K1, b=B)
  assert len(built) == 1  # the second call loaded the saved index
  assert search(again, "cats chase") == search(first, "cats chase")
  open_index(ANIMALS, directory, k1=1.2, b=B)  # other parameters: rebuilt
  changed = dict(ANIMALS, d3=Document("Birds sing cats."))
  assert [d for d, _ in search(open_index(changed, directory, k1=1.2, b=B), "cats")][-1] == "d3"
  assert len(built) == 3
  foreign = tmp_path / "not_an_index"
  foreign.mkdir()
  (foreign / "notes.txt").write_text("mine")
  with pytest.raises(FileExistsError, match="is not a t5rank index"):
    open_index(ANIMALS, str(foreign))


def _whiskers_corpus() -> dict[str, Document]:
  # 40 documents: "filler" is in 37 of them (over 10%: never a feedback term); cat, whisker, purr in
  # at most 3 (7.5%). Terms: c1 [cat whisker purr], c2 [cat whisker], c3 [whisker purr].
  corpus = {"c1": Document("cat whiskers purr"), "c2": Document("cat whiskers"),
            "c3": Document("whiskers purr")}
  corpus.update((f"f{i:02d}", Document("filler")) for i in range(37))
  return corpus


def test_rm3_expands_the_query_by_hand():
  index = BM25Index.build(_whiskers_corpus(), k1=K1, b=B, language="en")
  avgdl = 44 / 40
  s1, s2 = _bm25(1, 2, 40, 3, avgdl), _bm25(1, 2, 40, 2, avgdl)  # first-pass scores of c1, c2
  assert [d for d, _ in search(index, "cat")] == ["c2", "c1"]
  # Relevance model: P(t|c1) = 1/3 for cat, whisker, purr; P(t|c2) = 1/2 for cat, whisker; each
  # weighted by the document's score, summed, normalized by s1 + s2; then 0.5 query + 0.5 model.
  model = {"cat": s1 / 3 + s2 / 2, "whisker": s1 / 3 + s2 / 2, "purr": s1 / 3}
  expected = {t: 0.5 * w / (s1 + s2) + (0.5 if t == "cat" else 0.0) for t, w in model.items()}
  weights = {index.terms[t]: w for t, w in query_weights(index, "cat", RM3()).items()}
  assert weights == pytest.approx(expected, rel=1e-6)
  # The expansion retrieves c3, which has no query term.
  assert [d for d, _ in search(index, "cat", rm3=RM3())] == ["c2", "c1", "c3"]
  # fb_terms=1 keeps one term per document and in the model (ties by term: "cat" < "purr").
  assert {index.terms[t]: w for t, w in
          query_weights(index, "cat", RM3(fb_terms=1)).items()} == pytest.approx({"cat": 1.0})


def test_retrieve_command(tmp_path):
  corpus, queries, output = (str(tmp_path / n) for n in ("corpus.jsonl", "q.tsv", "bm25.run"))
  with open(corpus, "w") as f:
    f.writelines(f'{{"id": "{d}", "text": "{doc.text}"}}\n' for d, doc in ANIMALS.items())
  with open(queries, "w") as f:
    f.write("q1\tcats\nq2\tsmall mice\n")
  argv = ["retrieve", "--corpus", corpus, "--queries", queries, "--output", output,
          "--index", str(tmp_path / "index"), "--depth", "1"]
  assert cli.main(argv) == 0
  assert read_run(output) == {"q1": [("d2", pytest.approx(0.432593, abs=1e-6))],
                              "q2": [("d4", pytest.approx(_bm25(1, 1, 4, 2, 3.25), rel=1e-6))]}
  assert os.path.exists(tmp_path / "index" / "t5rank_index.json")
  with open(output) as f:
    assert f.readline().split()[:4] + f.readline().split()[5:] == ["q1", "Q0", "d2", "1", "bm25"]
  with pytest.raises(SystemExit, match="bm25.run exists; give --overwrite"):
    cli.main(argv + ["--rm3"])
  assert cli.main(argv + ["--rm3", "--overwrite"]) == 0
  with open(output) as f:
    assert f.readline().split()[5] == "bm25_rm3"
