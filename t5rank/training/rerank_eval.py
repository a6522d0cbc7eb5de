"""Reranking quality during training: MRR@10 of the model being trained on a small validation set,
InsuranceQA's or your own (`queries`, `corpus`, `qrels`, `run`: the files `t5rank score` reads).

    queries (first N of a split) x their pools (relevant answers + 200 retrieved negatives),
    from the one InsuranceQA loader (`t5rank.data.insuranceqa`)
      -> the `MonoT5` reranker's encoding and length buckets, scored by `t5rank.ranking.scorer`
      -> a run -> MRR@10, MRR, P@1 by `t5rank.evaluation.metrics` (trec_eval's semantics, ties
         included), the numbers `t5rank evaluate` gives for the same scores

`RerankEval(...)` reads the pools once; calling it with (params, config) scores them with the
model the config belongs to (a T5Config: monoT5; a TKConfig: TK, with its own word list; the
vocabulary, targets, max_length and BM25 options below are monoT5's). The trainer calls it every
`eval_every` steps; gin: `trainer.Loop.eval_fn = @rerank_eval.RerankEval()`. Its
`vocabulary` and `targets` must be the trained task's (T5's and true_false by default): the trainer
asks `check_task` before training, e.g. for `insuranceqa_en_8k_monot5_true_false` set
`rerank_eval.RerankEval.vocabulary = "insuranceqa_en_8k"`.
"""

from __future__ import annotations

from typing import Mapping, Optional

from t5rank.data import bm25_input
from t5rank.data.insuranceqa import load_split
from t5rank.data.xpr import xpr_split
from t5rank.evaluation.metrics import per_query
from t5rank.models import registry
from t5rank.models.vocab import (TargetSpec, VOCABULARIES, Vocabulary, load_vocabulary,
                                 resolve_target_words)
from t5rank.ranking.devices import default_batch_tokens, place_params, scoring_mesh
from t5rank.ranking.scorer import score_batches

METRICS = {"mrr@10": "MRR@10", "mrr": "MRR", "p@1": "P@1"}  # logged name -> t5rank evaluate's


class RerankEval:
  """Reranks the pools of the first `num_queries` queries of an InsuranceQA split (by id),
  tokenized with `vocabulary` (a name of `t5rank.models.vocab.VOCABULARIES` or a SentencePiece
  model path), cut to `max_length` ids and scored by the `targets` words. With `bm25_in_input`,
  each input carries the pair's BM25 score over all answers (`t5rank.data.bm25_input`), as the task
  `insuranceqa_en_8k_pseudo_bm25_*` trains. With `xpr_seed`, the pools are the split's
  cross-lingual construction for that seed (`t5rank.data.xpr`: queries and half of each pool in
  Chinese)."""

  def __init__(self, split: str = "validation", num_queries: int = 100, language: str = "en",
               max_length: int = 512, targets: str = "true_false", vocabulary: str = "t5",
               bm25_in_input: bool = False, xpr_seed: Optional[int] = None,
               queries: Optional[str] = None, corpus: Optional[str] = None,
               qrels: Optional[str] = None, run: Optional[str] = None,
               depth: Optional[int] = None):

    self.vocab = vocab = load_vocabulary(vocabulary)
    self.bm25_in_input = bm25_in_input
    self.max_length = max_length
    self.target_ids = resolve_target_words(vocab, targets)
    if any(f is not None for f in (queries, corpus, qrels, run)):  # the user's validation files
      self._own_files(queries, corpus, qrels, run, depth, num_queries, bm25_in_input)
      return
    if xpr_seed is not None:  # the cross-lingual pools (t5rank.data.xpr): `language` does not apply

      if bm25_in_input:
        raise ValueError("the XPR evaluation has no BM25-input variant (bm25_in_input = False)")
      data = xpr_split(split, xpr_seed, num_queries)
      texts = data.documents
    else:
      data = load_split(split, language, num_queries)
      texts = data.answers
    self.qrels = data.qrels()
    self.pairs = [(qid, aid) for qid, pool in data.pools.items() for aid in pool]
    self.queries = [data.queries[qid] for qid, _ in self.pairs]
    self.passages = [texts[aid] for _, aid in self.pairs]
    self.first_stage: Optional[list[float]] = None
    if bm25_in_input:

      answer_ids = list(data.answers)
      index = bm25_input.build_index(list(data.answers.values()), language)
      position = {aid: i for i, aid in enumerate(answer_ids)}
      self.first_stage = []
      for qid, pool in data.pools.items():
        scores = bm25_input.query_scores(index, data.queries[qid])
        self.first_stage.extend(float(s) for s in scores[[position[aid] for aid in pool]])
    self._prepared: dict = {}

  def _own_files(self, queries, corpus, qrels, run, depth, num_queries, bm25_in_input) -> None:
    """Pools from the user's validation files: the first `num_queries` queries of `run` (in its
    order) with a relevant document in `qrels`, each query's top `depth` candidates (all when
    None), with the run's scores as the first-stage scores when `bm25_in_input`."""
    from t5rank.data.readers import check_finite_run, read_corpus, read_qrels, read_queries, read_run
    from t5rank.ranking.candidates import check_candidates, split_at_depth

    missing = [name for name, value in (("queries", queries), ("corpus", corpus),
                                        ("qrels", qrels), ("run", run)) if value is None]
    if missing:
      raise ValueError(f"the evaluation on your own files needs queries, corpus, qrels and run; "
                       f"missing {', '.join(missing)} (gin: rerank_eval.RerankEval.{missing[0]})")
    texts, all_qrels = read_queries(queries), read_qrels(qrels)
    documents = read_corpus(corpus)
    candidates = read_run(run)
    check_finite_run(candidates, run)
    candidates = check_candidates(candidates, texts, documents, skip_missing=False,
                                  sources=(queries, corpus))
    judged = [q for q in candidates if any(v > 0 for v in all_qrels.get(q, {}).values())]
    if not judged:
      raise ValueError(f"{qrels} judges no candidate query of {run} relevant: nothing to evaluate")
    top, _ = split_at_depth({q: candidates[q] for q in judged[:num_queries]}, depth)
    from t5rank.data.readers import document_text

    self.qrels = {q: all_qrels[q] for q in top}
    self.pairs = [(q, d) for q, docs in top.items() for d, _ in docs]
    self.queries = [texts[q] for q, _ in self.pairs]
    self.passages = [document_text(documents[d]) for _, d in self.pairs]
    self.first_stage = ([s for docs in top.values() for _, s in docs] if bm25_in_input else None)
    self._prepared = {}

  def check_task(self, task_name: str, vocab: Vocabulary, targets: Optional[TargetSpec],
                 bm25_in_input: bool) -> None:
    """Raises ValueError when this evaluation tokenizes with another vocabulary than the task's,
    scores other target words than the task's `targets` (when known), or reads inputs with(out) the
    BM25 score when the task's are without (with) it."""

    if self.vocab.sha256 != vocab.sha256:
      name = next((n for n, (path, _) in VOCABULARIES.items() if path == vocab.path), vocab.path)
      raise ValueError(f"the evaluation tokenizes with {self.vocab.path} but task {task_name} "
                       f"with {vocab.path}; evaluate with the task's vocabulary (gin: "
                       f"rerank_eval.RerankEval.vocabulary = {name!r})")
    if targets is not None and self.target_ids != resolve_target_words(vocab, targets):
      raise ValueError(f"the evaluation scores target ids {self.target_ids} but task {task_name} "
                       f"trains the words {targets!r}; set RerankEval's targets to the task's (gin: "
                       f"rerank_eval.RerankEval.targets = {targets!r})")
    if self.bm25_in_input != bm25_in_input:
      raise ValueError(f"task {task_name} {'writes' if bm25_in_input else 'does not write'} the "
                       "BM25 score into its inputs but the evaluation "
                       f"{'does' if self.bm25_in_input else 'does not'}; set (gin) "
                       f"rerank_eval.RerankEval.bm25_in_input = {bm25_in_input}")

  def reranker(self, config):
    """The reranker of `config` (its family's, `t5rank.models.registry`), with this evaluation's
    options: vocabulary, target words, input length, BM25 score in the input."""

    return registry.for_config(config).reranker.for_evaluation(
        config, vocab=self.vocab, target_ids=self.target_ids, max_length=self.max_length,
        bm25_in_input=self.bm25_in_input)

  def scores(self, params, config):
    """(score, P) of every pair, in pool order, by `params` of the model `config`."""
    import jax


    # The trainer's parameters already lie on its (data, model) mesh: score there, so that a
    # model-parallel run is not copied whole onto every device.
    trained_mesh = getattr(getattr(jax.tree.leaves(params)[0], "sharding", None), "mesh", None)
    if not isinstance(trained_mesh, jax.sharding.Mesh):
      trained_mesh = None
    key = (config, trained_mesh)
    if key not in self._prepared:  # encoded and bucketed once per architecture and mesh
      reranker = self.reranker(config)
      mesh = trained_mesh if trained_mesh is not None else scoring_mesh()
      examples = reranker.encode(self.queries, self.passages, self.first_stage)
      batches = reranker.batches(examples, batch_tokens=default_batch_tokens(mesh, reranker.width),
                                 row_multiple=mesh.shape["data"])
      self._prepared = {key: (reranker, mesh, examples, batches)}
    reranker, mesh, examples, batches = self._prepared[key]
    state = reranker.shard_state(place_params(params, reranker.param_axes(), mesh), examples,
                                 mesh=mesh)
    return score_batches(reranker, state, batches, len(self.pairs), mesh=mesh)

  def __call__(self, params, config) -> Mapping[str, float]:

    scores, _ = self.scores(params, config)
    run: dict[str, list[tuple[str, float]]] = {}
    for (qid, aid), score in zip(self.pairs, scores.tolist()):
      run.setdefault(qid, []).append((aid, score))
    values = per_query(self.qrels, run, list(METRICS.values()))
    return {name: float(values[metric].mean()) for name, metric in METRICS.items()}
