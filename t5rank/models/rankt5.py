"""RankT5 Encoder-Decoder: T5 that outputs a ranking score, not a word (Zhuang et al., SIGIR 2023,
"RankT5: Fine-Tuning T5 for Text Ranking with Ranking Losses", section 3.2).

    "Query: q Document: d" (no `Relevant:`, no EOS) -> T5 encoder
    (a model trained with the first-stage score in its input, `bm25_in_input`: "Query: q BM25: 12
     Document: d", as monoT5's, `t5rank.data.bm25_input`)
      -> decoder([0]), ONE step -> the logit of the unused token <extra_id_10> (id 32089 in T5's
         vocabulary) = the score s (a real number; no softmax over target words)

The paper's (2): s = Dense(Dec(Enc(x)))[score token], i.e. the output projection's row of one
unused token at the first decoder step. What the published code fixes (google/rax
examples/t5x, the RankT5 authors' T5X recipe, read for this module):
  - tasks.py `_msmarco_preprocessor`: inputs `tf.strings.join(["Query:", q, "Document:", d], " ")`,
    targets "<extra_id_10>" for every document, with `add_eos=False` on both features: the input
    has no EOS, unlike monoT5's;
  - models.py `RankingEncDecModel._compute_logits`: decoder input 0 (the start id), and the score is
    the logit of `decoder_target_tokens` (the score token) taken from the full-vocabulary logits.
Here only that one row of the output projection is computed (`T5.decode(vocab_ids=...)`), which
gives the same number (tests/test_rankt5.py checks it against the full logits).

`RankT5` is the `Reranker`; `load_rankt5` the family's loader (any T5 checkpoint t5rank reads:
Google's published t5x checkpoints, gs://t5-data/pretrained_models/t5x/rankt5/{base,large,3B},
a t5rank export, a Hugging Face directory). A t5x checkpoint does not say what it is: name the
family (`--reranker rankt5`, `t5rank.load(path, reranker="rankt5")`). `log_probability = False`:
the score is a logit, the service's normalized score its sigmoid.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp

from t5rank.checkpoints.resolved import Checkpoint
from t5rank.models import registry
from t5rank.models.config import T5Config
from t5rank.models.inputs import DEFAULT_MAX_LENGTH, ScoreIds
from t5rank.models.network import T5
from t5rank.models.monot5 import TokenIdsReranker, load_t5
from t5rank.models.vocab import Vocabulary

MODEL_NAME = "rankt5"
SCORE_TOKEN = "<extra_id_10>"  # google/rax examples/t5x/tasks.py: "an unused token"
UNKNOWN_TOKEN = "<unk>"  # the score token of a vocabulary without extra ids (score_token_id)
TEMPLATE = "Query: {query} Document: {document}"  # no `Relevant:`, no EOS (module docstring)


class RankT5Marks:
  """The template's fixed words as ids, tokenized once per vocabulary."""

  def __init__(self, vocab: Vocabulary):
    self.query = vocab.encode("Query:")
    self.document = vocab.encode("Document:")


def rankt5_input(query_ids: Sequence[int], document_ids: Sequence[int], marks: RankT5Marks,
                 max_length: int, score_ids: Sequence[int] = ()) -> list[int]:
  """Ids of `Query: q Document: d` (with `score_ids`, the ids of `t5rank.models.inputs.score_text`:
  `Query: q BM25: 12 Document: d`), at most `max_length` long, without EOS: the document is cut
  first, a query too long to leave room for the template is cut at its end, the score never."""
  fixed = len(marks.query) + len(score_ids) + len(marks.document)
  if fixed >= max_length:
    raise ValueError(f"max_length {max_length} cannot hold the template and any text ({fixed} "
                     "tokens: Query: Document:)")
  query_ids = list(query_ids)[:max_length - fixed]
  room = max_length - fixed - len(query_ids)
  return marks.query + query_ids + list(score_ids) + marks.document + list(document_ids)[:room]


def encode_rankt5(vocab: Vocabulary, queries: Sequence[str], documents: Sequence[str],
                  max_length: int, scores: Optional[Sequence[float]] = None) -> list[list[int]]:
  """`rankt5_input` of every (query, document) pair, each distinct text tokenized once; with
  `scores`, each pair's first-stage score is written into its input."""
  if len(queries) != len(documents):
    raise ValueError(f"{len(queries)} queries but {len(documents)} documents")
  if scores is not None and len(scores) != len(queries):
    raise ValueError(f"{len(queries)} pairs but {len(scores)} scores")
  marks = RankT5Marks(vocab)
  distinct_queries = list(dict.fromkeys(queries))
  query_ids = dict(zip(distinct_queries, vocab.encode_batch(distinct_queries)))
  distinct_documents = list(dict.fromkeys(documents))
  document_ids = dict(zip(distinct_documents, vocab.encode_batch(distinct_documents)))
  score_ids = ScoreIds(vocab)
  return [rankt5_input(query_ids[q], document_ids[d], marks, max_length,
                       score_ids(scores[i]) if scores is not None else ())
          for i, (q, d) in enumerate(zip(queries, documents))]


def score_token_id(vocab: Vocabulary) -> int:
  """The id of the token whose logit is the score: `<extra_id_10>`, 32089 in T5's vocabulary
  (32,000 pieces + 100 extra ids, counted down from the top), as Google's checkpoints were
  trained. A vocabulary without it (a domain vocabulary of a model trained from scratch, such as
  insuranceqa_en_8k, which has no extra ids) scores with its unknown token `<unk>` instead, the
  one piece that text its SentencePiece model covers never yields (0 of InsuranceQA's 3.4M
  training ids)."""
  if vocab.extra_ids > 10:
    return vocab.piece_to_id(SCORE_TOKEN)
  return vocab.piece_to_id(UNKNOWN_TOKEN)


def rankt5_score(params, encoder_input_tokens: jax.Array, *, config: T5Config, score_id: int,
                 dropout_rng: Optional[jax.Array] = None) -> jax.Array:
  """(B,) float32 scores of padded ids (B, L): the logit of `score_id` at the first decoder step
  (paper's (2)). Pure; dropout when `dropout_rng` is given (training)."""
  tokens = jnp.asarray(encoder_input_tokens)
  decoder_input = jnp.zeros((tokens.shape[0], 1), jnp.int32)  # the start id 0
  deterministic = dropout_rng is None

  def one_logit(module: T5):
    encoded = module.encode(tokens, deterministic=deterministic)  # (B, L, D)
    return module.decode(encoded, tokens, decoder_input, vocab_ids=jnp.asarray([score_id]),
                         deterministic=deterministic)  # (B, 1, 1)

  logits = T5(config).apply({"params": params}, method=one_logit,
                            rngs=None if deterministic else {"dropout": dropout_rng})
  return logits[:, 0, 0].astype(jnp.float32)


@functools.partial(jax.jit, static_argnames=("config", "score_id"))
def score_step(params, encoder_input_tokens: jax.Array, *, config: T5Config,
               score_id: int) -> tuple[jax.Array, jax.Array]:
  """(score, sigmoid(score)), each (B,): `rankt5_score` compiled."""
  scores = rankt5_score(params, encoder_input_tokens, config=config, score_id=score_id)
  return scores, jax.nn.sigmoid(scores)


class RankT5(TokenIdsReranker):
  """RankT5 Encoder-Decoder as a `Reranker`: `Query: q Document: d` (with `bm25_in_input`, `Query:
  q BM25: 12 Document: d`) cut to `max_length` ids, scored by `score_step`."""

  name = MODEL_NAME
  log_probability = False  # a logit, any real number

  def __init__(self, config: T5Config, vocab: Vocabulary, *, max_length: int = DEFAULT_MAX_LENGTH,
               bm25_in_input: bool = False):
    if vocab.vocab_size > config.vocab_size:
      raise ValueError(f"vocabulary {vocab.path} has {vocab.vocab_size} ids but the model only "
                       f"{config.vocab_size} embedding rows; give the vocabulary it was trained "
                       "with (--vocab)")
    rankt5_input([], [], RankT5Marks(vocab), max_length)  # refuses a max_length too short
    self.config = config
    self.vocab = vocab
    self.score_id = score_token_id(vocab)
    self.max_length = max_length
    self.bm25_in_input = bm25_in_input

  @property
  def reads_first_stage(self) -> bool:
    return self.bm25_in_input

  def encode(self, queries: Sequence[str], passages: Sequence[str],
             first_stage: Optional[Sequence[float]] = None) -> list[list[int]]:
    if self.bm25_in_input and (first_stage is None or len(first_stage) != len(queries)):
      raise ValueError(f"this {self.name} model reads each candidate's first-stage (BM25) score "
                       "in its input: give one per pair")
    return encode_rankt5(self.vocab, queries, passages, self.max_length,
                         first_stage if self.bm25_in_input else None)

  def score_batch(self, params, arrays):
    (tokens,) = arrays
    return score_step(params, tokens, config=self.config, score_id=self.score_id)

  def fingerprint(self) -> dict:
    return {"model": self.name, "config": json.loads(self.config.to_json()),
            "vocab": self.vocab.sha256, "score_id": self.score_id, "max_length": self.max_length,
            **({"bm25_in_input": True} if self.bm25_in_input else {})}

  def describe(self) -> str:
    return (f"RankT5 encoder-decoder ({self.config.num_parameters / 1e6:.1f}M parameters, "
            f"{self.config.dtype}, score = logit of "
            f"{self.vocab.id_to_piece(self.score_id)} ({self.score_id}), max_length "
            f"{self.max_length}{', BM25 score in the input' if self.bm25_in_input else ''})")

  @classmethod
  def for_evaluation(cls, config: T5Config, *, vocab: Vocabulary, max_length: int,
                     bm25_in_input: bool = False, **_) -> "RankT5":
    """RankT5 as training-time evaluation scores it (target words do not apply)."""
    return cls(config, vocab, max_length=max_length, bm25_in_input=bm25_in_input)


def refuse_monot5_options(checkpoint: Checkpoint, family: str, targets,
                          truncation: Optional[str] = None) -> None:
  """ValueError for monoT5's options, which a RankT5 model does not have."""
  if truncation not in (None, "document"):
    raise ValueError(f"{checkpoint.path} is a {family} model: its input ends with the document, "
                     "which is what is cut past max_length (truncation='input' is pygaggle's cut "
                     "of monoT5's and duoT5's inputs)")
  if targets is not None:
    raise ValueError(f"{checkpoint.path} is a {family} model: its score is the logit of "
                     f"{SCORE_TOKEN}, it has no target words (--targets is for monoT5)")


def reads_bm25(checkpoint: Checkpoint, bm25_in_input: Optional[bool]) -> bool:
  """Whether a RankT5 model reads each candidate's BM25 score in its input: as given, else as its
  metadata says."""
  return bool(checkpoint.bm25_in_input) if bm25_in_input is None else bm25_in_input


def load_rankt5(checkpoint: Checkpoint, *, config_name: Optional[str] = None,
                vocab: Optional[str] = None, dtype: Optional[str] = None,
                max_length: Optional[int] = None, targets=None,
                bm25_in_input: Optional[bool] = None, truncation: Optional[str] = None) -> tuple[RankT5, Any]:
  """(RankT5, parameters) of a T5 checkpoint in any format (`config_name` for those without a
  config: t5x, Mesh TF; Google's RankT5 checkpoints are T5 1.0's architecture, `t5_base`,
  `t5_large`, `t5_3B`), with the vocabulary it carries (T5's when it names none) and `max_length`
  as given, else as stored, else 512, and the BM25 score in its input as given, else as its
  metadata says (`bm25_in_input`: a model trained so), else not. `dtype` casts parameters and
  activations."""
  refuse_monot5_options(checkpoint, MODEL_NAME, targets, truncation)
  config, params, vocabulary = load_t5(checkpoint, config_name=config_name, dtype=dtype,
                                       vocab=vocab)
  try:
    reranker = RankT5(config, vocabulary,
                      max_length=max_length or checkpoint.max_length or DEFAULT_MAX_LENGTH,
                      bm25_in_input=reads_bm25(checkpoint, bm25_in_input))
  except ValueError as e:
    raise ValueError(f"{checkpoint.path}: {e}") from None
  return reranker, params


registry.register(registry.Family(
    name=MODEL_NAME, config=T5Config, reranker=RankT5, loader=load_rankt5,
    trainable="t5rank.training.listwise.RankT5Listwise",
    description="T5 scoring with the logit of <extra_id_10> at the first decoder step, trained "
                "with ranking losses (Zhuang et al. 2023)"))
