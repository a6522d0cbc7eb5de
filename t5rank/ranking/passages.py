"""Long documents as windows of sentences, and the aggregation of window scores into a document score
(`aggregate`; `rank_documents` ranks each query's documents so, from the scorer's rows).

The MaxP recipe of the monoT5 paper for Robust04 (after Dai and Callan 2019, as pygaggle runs it):
split a document into sentences, take windows of `window` sentences every `stride` sentences, stop
at the first window that reaches the end, score each window on its own and keep the best. A document
shorter than one window is one passage; `window=0` keeps the whole document as one passage.

Sentences come from `sentencex` (Wikimedia's rule-based splitter, offline, ~300 languages), which
breaks on English `.!?` with abbreviation rules and on Chinese `。！？`. Windows are exact slices of
the document text (no separator is invented between sentences); a title is put in front of each.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from t5rank.data.readers import Document, Run, document_text

DOCUMENT_WINDOW, DOCUMENT_STRIDE = 10, 5  # the paper's values for document collections
AGGREGATIONS = ("maxp", "firstp", "sump", "meanp")


def split_sentences(text: str, language: str = "en") -> list[str]:
  """Sentences of `text`, each with its trailing whitespace, so that "".join(...) == text."""
  import sentencex  # only windows need it: `--window 0` scores without it

  return [s for s in sentencex.segment(language, text) if s]


def window_sentences(sentences: Sequence[str], window: int, stride: int) -> list[str]:
  """Windows of `window` sentences starting every `stride` sentences, up to the first one that
  reaches the last sentence; each window is its sentences joined as they stand, stripped.

  >>> window_sentences(["a. ", "b. ", "c. ", "d."], window=2, stride=1)
  ['a. b.', 'b. c.', 'c. d.']
  """
  if window < 1 or stride < 1:
    raise ValueError(f"window and stride must be positive, got window={window}, stride={stride}")
  windows = []
  for start in range(0, max(len(sentences), 1), stride):
    windows.append("".join(sentences[start:start + window]).strip())
    if start + window >= len(sentences):
      break
  return windows


def document_passages(document: Document, window: int = DOCUMENT_WINDOW,
                      stride: int = DOCUMENT_STRIDE, language: str = "en") -> list[str]:
  """The passages scored for `document`: its windows (or the whole text when `window` is 0), each
  preceded by the title when there is one. Never empty: an empty document is one empty passage."""
  if window == 0:
    texts = [document.text.strip()]
  else:
    texts = window_sentences(split_sentences(document.text, language), window, stride)
  return [document_text(document, text) for text in texts]


def aggregate(window_scores: Sequence[float], method: str = "maxp") -> tuple[float, int]:
  """(document score, index of the winning window) from the scores of a document's windows.

  maxp: the best window; firstp: the first window; sump / meanp: the sum / mean of the windows. The
  winning window is the best-scoring one (the first on ties), except for firstp, where it is 0.
  """
  if method not in AGGREGATIONS:
    raise ValueError(f"unknown aggregation {method!r}; choose one of {AGGREGATIONS}")
  scores = np.asarray(window_scores, np.float64)
  if scores.size == 0:
    raise ValueError("a document has at least one window score")
  best = int(np.argmax(scores))
  if method == "maxp":
    return float(scores[best]), best
  if method == "firstp":
    return float(scores[0]), 0
  if method == "sump":
    return float(scores.sum()), best
  return float(scores.mean()), best


def rank_documents(rows: Iterable[tuple], aggregation: str
                   ) -> tuple[Run, dict[tuple[str, str], int]]:
  """(run, winners) from the scored rows, (`t5rank.ranking.candidates.Pair`, log P, P) each: each
  query's documents scored by `aggregate` over their windows' log P and
  sorted by score descending, then docid ascending; winners maps (qid, docid) to the winning window.
  Queries keep the order in which they first appear in `rows`."""
  windows: dict[str, dict[str, dict[int, float]]] = {}
  for pair, log_p, _ in rows:
    windows.setdefault(pair.qid, {}).setdefault(pair.docid, {})[pair.part] = log_p
  run: Run = {}
  winners = {}
  for qid, docs in windows.items():
    scored = []
    for docid, by_window in docs.items():
      if len(by_window) == 1 and aggregation in AGGREGATIONS:  # one passage: its score, any way
        score, best = float(next(iter(by_window.values()))), 0
      else:
        score, best = aggregate([by_window[w] for w in sorted(by_window)], aggregation)
      scored.append((docid, score))
      winners[qid, docid] = best
    run[qid] = sorted(scored, key=lambda item: (-item[1], item[0]))
  return run, winners
