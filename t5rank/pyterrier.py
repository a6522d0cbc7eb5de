"""PyTerrier transformers over any t5rank checkpoint (the optional `pyterrier` extra): rerank a
PyTerrier results frame, as pyterrier_t5's MonoT5ReRanker and DuoT5ReRanker do, in JAX.

    import pyterrier as pt
    from t5rank.pyterrier import Reranker

    mono = Reranker("castorini/monot5-base-msmarco-10k")
    duo = Reranker("castorini/duot5-base-msmarco", reranker="duot5")
    pipeline = bm25 >> pt.text.get_text(dataset, "text") >> mono % 100 >> duo

A frame with `qid, query, docno, text` (and `score` from the stage before) goes in; the same rows
come out with `score` (`t5rank.load(...).rank`'s: `t5rank score`'s score) and `rank` (from 0,
PyTerrier's convention), each query's rows sorted best first. The incoming `score` is kept as
`first_stage_score` the first time a t5rank transformer sees the frame: a model that reads each
candidate's BM25 score in its input (the shipped monoT5, RankT5 and duoT5) reads it from there,
whatever stages came between. PyTerrier's transformers run without Java.
"""

from __future__ import annotations

from typing import Any, Optional

import pyterrier as pt

from t5rank.ranker import Ranker, load

FIRST_STAGE = "first_stage_score"


class Reranker(pt.Transformer):
  """A t5rank checkpoint as a PyTerrier transformer; `options` are `t5rank.load`'s (`reranker`,
  `dtype`, `depth`, `window`, ...). `text_field` names the column with the document text;
  `batch_size` (pairs scored at a time) and `verbose` (a progress bar) as pyterrier_t5's
  rerankers take them."""

  def __init__(self, checkpoint: str, *, text_field: str = "text", batch_size: Optional[int] = None,
               verbose: bool = False, **options: Any):
    self.checkpoint = checkpoint
    self.text_field = text_field
    self.batch_size, self.verbose = batch_size, verbose  # as pyterrier_t5's rerankers take them
    self.ranker: Ranker = load(checkpoint, **options)

  def __repr__(self) -> str:
    return f"t5rank.pyterrier.Reranker({self.checkpoint!r}, {self.ranker.family})"

  def transform(self, inp):
    import pandas as pd

    missing = [c for c in ("qid", "query", "docno", self.text_field) if c not in inp.columns]
    if missing:
      raise ValueError(f"{self!r} needs the columns qid, query, docno and {self.text_field}; the "
                       f"frame lacks {', '.join(missing)} (add the text with pt.text.get_text)")
    frame = inp.copy()
    if FIRST_STAGE not in frame.columns and "score" in frame.columns:
      frame[FIRST_STAGE] = frame["score"].astype(float)
    out = []
    for _, group in frame.groupby("qid", sort=False):
      group = group.reset_index(drop=True)
      if "score" in group.columns:  # the stage before's ranking orders the candidates (depth)
        group = group.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)
      first = (group[FIRST_STAGE].tolist() if self.ranker.reranker.reads_first_stage
               and FIRST_STAGE in group.columns else None)
      ranked = self.ranker.rank(str(group["query"].iloc[0]), group[self.text_field].tolist(),
                                first_stage_scores=first, batch_size=self.batch_size,
                                show_progress_bar=self.verbose)
      rows = group.iloc[[r["corpus_id"] for r in ranked]].copy()
      rows["score"] = [r["score"] for r in ranked]
      rows["rank"] = range(len(rows))
      out.append(rows)
    if not out:
      return frame.assign(score=pd.Series(dtype=float), rank=pd.Series(dtype=int))
    return pd.concat(out, ignore_index=True)
