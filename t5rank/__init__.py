"""t5rank: neural reranking (monoT5 first) in JAX, one package per stage of the pipeline.

    data/ ─► retrieval/ (first stage) ─► models/ (rerankers) ─► ranking/ (the scorer) ─► evaluation/
    training/ trains the models; commands/ is the `t5rank` command; pipelines/ the end-to-end jobs.

Every reranker is a `t5rank.models.reranker.Reranker` (monoT5: `t5rank.models.monot5.MonoT5`), every
first stage a `t5rank.retrieval.base.Retriever` (BM25: `t5rank.retrieval.bm25.BM25`). From Python:

    import t5rank
    ranker = t5rank.load("castorini/monot5-base-msmarco")   # the Python front door (t5rank.ranker)
    ranker.rank(query, documents, top_k=10)
"""

__version__ = "0.1.0"


def __getattr__(name: str):
  """`t5rank.load` and `t5rank.Ranker`, imported on first use (so that `import t5rank` and
  `t5rank --help` load no JAX)."""
  if name in ("load", "Ranker"):
    from t5rank import ranker

    return getattr(ranker, name)
  raise AttributeError(f"module 't5rank' has no attribute {name!r}")
