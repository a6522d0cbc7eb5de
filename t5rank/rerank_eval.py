"""Reranking quality during training: MRR@10 of the monoT5 score on a small InsuranceQA dev set.

    queries (first N of a split) x their pools (relevant answers + 200 retrieved negatives)
      -> monoT5 ids, sorted by length, fixed-size batches -> `monot5_score` -> rank by P(positive)
      -> MRR@10, MRR, P@1 (each query's relevant answers are the qrels)

`RerankEval(...)` encodes the pairs once; calling it with (params, config) scores them. The trainer
calls it every `eval_every` steps (`train.eval_fn`); gin: `train.eval_fn = @rerank_eval.RerankEval()`.
Its `vocabulary` and `targets` must be the trained task's (T5's and true_false by default): the
trainer refuses to start otherwise, e.g. for `insuranceqa_en_8k_monot5_true_false` set
`rerank_eval.RerankEval.vocabulary = "insuranceqa_en_8k"`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from t5rank.config import T5Config

ROWS = 64  # pairs per scoring batch
LENGTH_STEP = 32  # padded lengths are multiples of this, so that few shapes are compiled


def ranking_metrics(scores: Sequence[np.ndarray], relevant: Sequence[np.ndarray]
                    ) -> dict[str, float]:
  """MRR@10, MRR and P@1 over queries, from each query's candidate scores and 0/1 relevance.
  Ties are broken by candidate order (stable), so a constant scorer ranks in pool order."""
  mrr10, mrr, p1 = [], [], []
  for s, r in zip(scores, relevant):
    order = np.argsort(-np.asarray(s), kind="stable")
    hits = np.flatnonzero(np.asarray(r)[order])
    rank = int(hits[0]) + 1 if len(hits) else 0
    mrr.append(1.0 / rank if rank else 0.0)
    mrr10.append(1.0 / rank if 0 < rank <= 10 else 0.0)
    p1.append(float(rank == 1))
  return {"mrr@10": float(np.mean(mrr10)), "mrr": float(np.mean(mrr)), "p@1": float(np.mean(p1))}


class RerankEval:
  """Reranks the pools of the first `num_queries` queries of an InsuranceQA split (sorted by id),
  tokenized with `vocabulary` (a name of `t5rank.vocab.VOCABULARIES` or a SentencePiece model path)
  and scored by the `targets` words. With `bm25_in_input`, each input carries the pair's BM25 score
  over all answers (`t5rank.bm25_input`), as the task `insuranceqa_en_8k_pseudo_bm25_*` trains."""

  def __init__(self, split: str = "validation", num_queries: int = 100, language: str = "en",
               max_length: int = 512, targets: str = "true_false", vocabulary: str = "t5",
               bm25_in_input: bool = False):
    import insuranceqa_data

    from t5rank.inputs import encode_pairs
    from t5rank.sources import INSURANCEQA_SPLITS
    from t5rank.vocab import load_vocabulary, resolve_target_words

    self.vocab = vocab = load_vocabulary(vocabulary)
    self.bm25_in_input = bm25_in_input
    self.target_ids = resolve_target_words(vocab, targets)
    answers = insuranceqa_data.load_answers()
    records = getattr(insuranceqa_data, INSURANCEQA_SPLITS[split])()
    self.qids = sorted(records, key=int)[:num_queries]
    self.pools: list[list[str]] = []  # answer ids, in candidate order
    queries, documents, self.relevant, self.pool_sizes = [], [], [], []
    scores = []
    if bm25_in_input:
      from t5rank import bm25_input

      answer_ids = sorted(answers, key=int)
      index = bm25_input.build_index([answers[a][language] for a in answer_ids], language)
      position = {aid: i for i, aid in enumerate(answer_ids)}
    for qid in self.qids:
      record = records[qid]
      pool = sorted(set(record["answers"]) | set(record["negatives"]), key=int)
      self.pools.append(pool)
      queries += [record[language]] * len(pool)
      documents += [answers[aid][language] for aid in pool]
      self.relevant.append(np.isin(pool, record["answers"]))
      self.pool_sizes.append(len(pool))
      if bm25_in_input:
        all_scores = bm25_input.query_scores(index, record[language])
        scores.extend(all_scores[[position[aid] for aid in pool]])
    self.ids = encode_pairs(vocab, queries, documents, max_length, scores if bm25_in_input else None)

  def batches(self) -> list[tuple[np.ndarray, np.ndarray]]:
    """(row indices, padded ids (ROWS, L)) in order of length; the last batch is padded with rows of
    zeros, whose scores are dropped."""
    order = np.argsort([len(x) for x in self.ids], kind="stable")
    out = []
    for start in range(0, len(order), ROWS):
      rows = order[start:start + ROWS]
      longest = max(len(self.ids[i]) for i in rows)
      batch = np.zeros((ROWS, -(-longest // LENGTH_STEP) * LENGTH_STEP), np.int32)
      for j, i in enumerate(rows):
        batch[j, :len(self.ids[i])] = self.ids[i]
      out.append((rows, batch))
    return out

  def __call__(self, params, config: T5Config) -> Mapping[str, float]:
    from t5rank.score import score_step

    scores = np.zeros(len(self.ids), np.float32)
    for rows, batch in self.batches():
      log_p, _ = score_step(params, batch, config=config, target_ids=self.target_ids)
      scores[rows] = np.asarray(log_p)[:len(rows)]
    per_query = np.split(scores, np.cumsum(self.pool_sizes)[:-1])
    return ranking_metrics(per_query, self.relevant)
