"""duoT5, the pairwise stage of the Expando-Mono-Duo design (Pradeep, Nogueira, Lin 2021, "The
Expando-Mono-Duo Design Pattern for Text Ranking with Pretrained Sequence-to-Sequence Models").

    Query: q Document0: d0 Document1: d1 Relevant:  ─► T5 encoder + ONE decoder step
      ─► the logits of the two target words (true, false) ─► p(d0 more relevant than d1) = softmax

Every ordered pair of a query's top K candidates is scored (K(K-1) inputs) and a candidate's score
aggregates its pairs (`t5rank.ranking.duo_pairs.aggregate`: sym-sum, the paper's and pygaggle's
default, Σ_j p(d_i > d_j) + (1 − p(d_j > d_i)); sum, sym-log-sum, log-sum).

The score of one pair is monoT5's (`t5rank.models.monot5.score_step`: the same network, the two
target logits of the first decoder step) on this input; the model is trained through the same
trainer and SeqIO tasks on pairs of one relevant and one non-relevant answer in both orders
(`t5rank.data.preprocessors.split_triples_duo`, `format_duot5`, `tokenize_duot5`), from a monoT5
checkpoint as the paper does.

With `bm25_in_input` (the duoT5 twin of monoT5's, `t5rank.data.bm25_input`), each document's
first-stage score precedes its mark as monoT5's precedes `Document:`, so that a duoT5 started from a
BM25-reading monoT5 reads each document's score where that monoT5 learned to:

    Query: q BM25: 14 Document0: d0 BM25: 9 Document1: d1 Relevant:

When the input must be cut, the query keeps its tokens (as monoT5's) and the two documents share the
room left (the scores, like the template, are never cut): each keeps up to half, and a document
shorter than its half gives the rest to the other, so that both documents and `Relevant:` are
always read. pygaggle instead tokenizes the whole string and cuts it at 512 tokens from the end:
with two long documents the second is cut first, possibly to nothing, and `Relevant:` is lost;
`truncation="input"` cuts as pygaggle does (`t5rank.models.inputs.cut_input`).
"""

from __future__ import annotations

from typing import Optional, Sequence

from t5rank.models import registry
from t5rank.models.config import T5Config
from t5rank.models.inputs import DEFAULT_MAX_LENGTH, ScoreIds, cut_input, score_text
from t5rank.models.monot5 import MonoT5, load_t5_reranker
from t5rank.models.vocab import EOS_ID, Vocabulary

TEMPLATE = "Query: {query} Document0: {document0} Document1: {document1} Relevant:"
SCORED_TEMPLATE = ("Query: {query} {score0} Document0: {document0} {score1} Document1: {document1} "
                   "Relevant:")


class DuoTemplateIds:
  """The template's fixed words as ids, tokenized once per vocabulary."""

  def __init__(self, vocab: Vocabulary):
    self.query = vocab.encode("Query:")
    self.document0 = vocab.encode("Document0:")
    self.document1 = vocab.encode("Document1:")
    self.relevant = vocab.encode("Relevant:")


def format_input(query: str, document0: str, document1: str,
                 scores: Optional[tuple[float, float]] = None) -> str:
  """The duoT5 input text of one ordered pair (before tokenization); with `scores`, each
  document's first-stage score before its mark."""
  if scores is None:
    return TEMPLATE.format(query=query, document0=document0, document1=document1)
  return SCORED_TEMPLATE.format(query=query, document0=document0, document1=document1,
                                score0=score_text(scores[0]), score1=score_text(scores[1]))


def assemble(query_ids: Sequence[int], first: Sequence[int], second: Sequence[int],
             marks: DuoTemplateIds, max_length: int = DEFAULT_MAX_LENGTH,
             score_ids: tuple[Sequence[int], Sequence[int]] = ((), ()),
             truncation: str = "document") -> list[int]:
  """Ids of one input with EOS, at most `max_length` long: the documents share the room the query
  and the template leave (each up to half; a shorter one gives the rest to the other, module
  docstring); only a query too long to leave room for the template is cut itself. `score_ids`:
  the ids of each document's `score_text`, before its mark (never cut). `truncation="input"`:
  the whole input cut at its end, as pygaggle's."""
  score0, score1 = (list(ids) for ids in score_ids)
  if truncation == "input":
    return cut_input(marks.query + list(query_ids) + score0 + marks.document0 + list(first)
                     + score1 + marks.document1 + list(second) + marks.relevant, max_length)
  fixed = (len(marks.query) + len(marks.document0) + len(marks.document1) + len(marks.relevant)
           + len(score0) + len(score1) + 1)
  if fixed > max_length:
    raise ValueError(f"max_length {max_length} cannot hold the template itself ({fixed} tokens)")
  query_ids = list(query_ids)[:max_length - fixed]
  room = max_length - fixed - len(query_ids)
  kept_first = min(len(first), max(room // 2, room - len(second)))
  kept_second = min(len(second), room - kept_first)
  return (marks.query + query_ids + score0 + marks.document0 + list(first)[:kept_first] + score1
          + marks.document1 + list(second)[:kept_second] + marks.relevant + [EOS_ID])


class DuoT5(MonoT5):
  """duoT5 as a `Reranker` of ordered pairs: `encode` takes the pair's two documents as one
  `passage` (a (d0, d1) tuple) and, with `bm25_in_input`, their first-stage scores as one
  `first_stage` entry (a (s0, s1) tuple); `score_batch` gives (log p, p) of d0 being the more
  relevant.
  Its job (`t5rank.ranking.duo_pairs.PairJob`): every ordered pair of each query's top candidates is
  scored and a candidate's score aggregates its pairs."""

  name = "duot5"
  log_probability = False  # the pair aggregation's sum of probabilities, not a log-probability
  job = "t5rank.ranking.duo_pairs.PairJob"

  def __init__(self, config: T5Config, vocab: Vocabulary, target_ids: tuple[int, int], *,
               max_length: int = DEFAULT_MAX_LENGTH, bm25_in_input: bool = False,
               truncation: str = "document"):
    super().__init__(config, vocab, target_ids, max_length=max_length,
                     bm25_in_input=bm25_in_input, truncation=truncation)

  def encode(self, queries: Sequence[str], passages: Sequence[tuple[str, str]],
             first_stage: Optional[Sequence[tuple[float, float]]] = None) -> list[list[int]]:
    """Ids (with EOS, unpadded) of each ordered pair's input, each distinct text tokenized once;
    `first_stage`: each pair's two first-stage scores, read with `bm25_in_input`."""
    if len(queries) != len(passages):
      raise ValueError(f"{len(queries)} queries but {len(passages)} document pairs")
    if self.bm25_in_input and (first_stage is None or len(first_stage) != len(queries)):
      raise ValueError("this duoT5 reads each document's BM25 score: give two scores per pair")
    marks, score_ids = DuoTemplateIds(self.vocab), ScoreIds(self.vocab)
    texts = list(dict.fromkeys([*queries, *(d for pair in passages for d in pair)]))
    ids = dict(zip(texts, self.vocab.encode_batch(texts)))
    return [assemble(ids[q], ids[d0], ids[d1], marks, self.max_length,
                     (score_ids(first_stage[i][0]), score_ids(first_stage[i][1]))
                     if self.bm25_in_input else ((), ()), self.truncation)
            for i, (q, (d0, d1)) in enumerate(zip(queries, passages))]

  def describe(self) -> str:
    return (f"duoT5 ({self.config.num_parameters / 1e6:.1f}M parameters, {self.config.dtype}, "
            f"targets {self.target_ids}, max_length {self.max_length}"
            f"{', BM25 scores in the input' if self.bm25_in_input else ''}"
            f"{', the whole input cut' if self.truncation == 'input' else ''}; p(d0 > d1) of "
            "every ordered pair)")


def load_duot5(checkpoint, **options):
  """(DuoT5, parameters) of `checkpoint` (a `t5rank.checkpoints.resolved.Checkpoint`;
  `t5rank.models.monot5.load_t5_reranker`): a duoT5 checkpoint of t5rank, or any T5 checkpoint
  given `--reranker duot5` (castorini's duoT5 in Hugging Face form)."""
  return load_t5_reranker(DuoT5, checkpoint, **options)


registry.register(registry.Family(
    name=DuoT5.name, config=T5Config, reranker=DuoT5,
    trainable="t5rank.training.seq2seq.Seq2Seq", loader=load_duot5,
    description="T5 scoring p(d0 more relevant than d1) of ordered pairs (Pradeep et al. 2021)"))
