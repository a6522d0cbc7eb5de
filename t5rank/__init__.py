"""t5rank: neural reranking (monoT5 first) in JAX, one package per stage of the pipeline.

The layers, each importing only those before it (the arrow: "is used by"):

    files, checkpoints/ (files of any model) ─► models/ (the networks, rerankers, their weights)
      ─► data/ and retrieval/ (texts, the first stage) ─► evaluation/ (metrics)
      ─► ranking/ (the scorer) ─► training/, ranker (`t5rank.load`), serving/ (`t5rank serve`)
      ─► pipelines/ (the end-to-end jobs) ─► commands/ (the `t5rank` command)

Every reranker is a `t5rank.models.reranker.Reranker` (monoT5: `t5rank.models.monot5.MonoT5`), every
first stage a `t5rank.retrieval.base.Retriever` (BM25: `t5rank.retrieval.bm25.BM25`). From Python:

    import t5rank
    ranker = t5rank.load("castorini/monot5-base-msmarco")   # the Python front door (t5rank.ranker)
    ranker.rank(query, documents, top_k=10)
"""

__version__ = "0.1.0"

import importlib.util as _util
import os as _os
import sys as _sys


class _CheckoutTasks:
  """`t5rank.tasks` from a checkout on PYTHONPATH, where no install maps the top-level `tasks/`
  into the package (setup.py's package_dir does when installed, editable or not): found last on
  `sys.meta_path`, so an installed mapping always wins."""

  @staticmethod
  def find_spec(name, path=None, target=None):
    if name != "t5rank.tasks":
      return None
    init = _os.path.join(_os.path.dirname(_os.path.dirname(__file__)), "tasks", "__init__.py")
    if not _os.path.isfile(init):
      return None
    return _util.spec_from_file_location(name, init,
                                         submodule_search_locations=[_os.path.dirname(init)])


if not any(isinstance(f, type) and f.__name__ == "_CheckoutTasks" for f in _sys.meta_path):
  _sys.meta_path.append(_CheckoutTasks)


def __getattr__(name: str):
  """`t5rank.load` and `t5rank.Ranker`, imported on first use (so that `import t5rank` and
  `t5rank --help` load no JAX)."""
  if name in ("load", "Ranker"):
    from t5rank import ranker

    return getattr(ranker, name)
  raise AttributeError(f"module 't5rank' has no attribute {name!r}")
