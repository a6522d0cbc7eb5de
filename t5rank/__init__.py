"""t5rank: neural reranking (monoT5 first) in JAX, one package per stage of the pipeline.

    data/ ─► retrieval/ (first stage) ─► models/ (rerankers) ─► ranking/ (the scorer) ─► evaluation/
    training/ trains the models; commands/ is the `t5rank` command; pipelines/ the end-to-end jobs.

Every reranker is a `t5rank.models.reranker.Reranker` (monoT5: `t5rank.models.monot5.MonoT5`), every
first stage a `t5rank.retrieval.base.Retriever` (BM25: `t5rank.retrieval.bm25.BM25`).
"""

__version__ = "0.1.0"
