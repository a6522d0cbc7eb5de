"""SeqIO preprocessors for monoT5: pure `tf.data.Dataset -> tf.data.Dataset` functions.

A training task chains them as

    {query, positive, negative}                     one triple (the sources' common form)
      -> split_triples   -> {query, document, label}   positive then negative, label 1 / 0
      -> format_monot5   -> + inputs / targets text     "Query: q Document: d Relevant:" -> "true"
      -> tokenize_monot5 -> inputs / targets ids        the document cut, `Relevant:` and EOS kept

`split_triples` is what makes batches class-balanced: the positive and the negative of a triple
come out next to each other, so any even-sized batch of consecutive examples is half and half.
Shuffling therefore happens on triples, before it (see `t5rank.data.training_data`), never after it.

With `bm25_in_input` (`t5rank.data.bm25_input`), triples carry `positive_score` / `negative_score`, the
pairs a `score`, and the input reads `Query: q BM25: 12 Document: d Relevant:`.
"""

from __future__ import annotations

from typing import Mapping, Optional

import seqio
import tensorflow as tf

from t5rank.models.inputs import DEFAULT_MAX_LENGTH, SCORE_MARK, TemplateIds
from t5rank.models.vocab import (DEFAULT_VOCABULARY, EOS_ID, TargetSpec, Vocabulary, load_vocabulary,
                          resolve_target_words, vocabulary_file)

Features = Mapping[str, seqio.Feature]


def seqio_vocabulary(vocabulary: str = DEFAULT_VOCABULARY) -> seqio.SentencePieceVocabulary:
  """The SeqIO twin of `t5rank.models.vocab.load_vocabulary(vocabulary)` (a name of
  `t5rank.models.vocab.VOCABULARIES` or a path): the same file, extra ids and ids."""
  path, extra_ids = vocabulary_file(vocabulary)
  return seqio.SentencePieceVocabulary(path, extra_ids=extra_ids)


def output_features(vocabulary: str = DEFAULT_VOCABULARY) -> dict[str, seqio.Feature]:
  """`inputs` and `targets`, both on `vocabulary` (T5's by default); EOS is appended by
  `tokenize_monot5`."""
  vocab = seqio_vocabulary(vocabulary)
  return {"inputs": seqio.Feature(vocab, add_eos=True), "targets": seqio.Feature(vocab, add_eos=True)}


def features_vocabulary(output_features: Optional[Features]) -> Vocabulary:
  """t5rank's `Vocabulary` on the file and extra ids of the features' SeqIO vocabulary (`inputs`
  and `targets` share it); T5's when `output_features` is None."""
  if output_features is None:
    return load_vocabulary()
  vocab = output_features["inputs"].vocabulary
  return load_vocabulary(vocab.sentencepiece_model_file, vocab.extra_ids)


def split_triples(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """Each triple becomes two labelled pairs, the positive first (class-balanced interleaving).

  {"query": "q", "positive": "p", "negative": "n"}
    -> {"query": "q", "document": "p", "label": 1}, {"query": "q", "document": "n", "label": 0}
  Scored triples (+ "positive_score": 14.2, "negative_score": 9.7) give pairs with a "score".
  """

  def pairs(ex):
    out = {"query": tf.stack([ex["query"], ex["query"]]),
           "document": tf.stack([ex["positive"], ex["negative"]]),
           "label": tf.constant([1, 0], tf.int32)}
    if "positive_score" in ex:
      out["score"] = tf.stack([ex["positive_score"], ex["negative_score"]])
    return tf.data.Dataset.from_tensor_slices(out)

  return dataset.flat_map(pairs)


def target_texts(targets: TargetSpec, vocab: Vocabulary) -> tuple[str, str]:
  """(positive, negative) target text for a variant name or pair; each text is one piece of
  `vocab`, checked here (`▁ab` is written `ab`, which SentencePiece encodes as `▁ab`)."""
  ids = resolve_target_words(vocab, targets)
  words = vocab.id_to_piece(ids[0]), vocab.id_to_piece(ids[1])
  texts = tuple(w[1:] if w.startswith("▁") else w for w in words)
  for text, token_id in zip(texts, ids):
    if vocab.encode(text) != [token_id]:
      raise ValueError(f"target text {text!r} does not encode to the single piece {token_id}")
  return texts


def _score_text(score: tf.Tensor) -> tf.Tensor:
  """`t5rank.models.inputs.score_text` in TensorFlow: "BM25: 12" (tf.round rounds half to even, as
  Python's round)."""
  tf.debugging.assert_greater_equal(score, tf.constant(0, score.dtype),
                                    message="a BM25 score must be >= 0")
  return tf.strings.join([SCORE_MARK + " ", tf.strings.as_string(tf.cast(tf.round(score), tf.int64))])


def _check_scores(ex, bm25_in_input: bool) -> None:
  if bm25_in_input and "score" not in ex:
    raise ValueError("bm25_in_input needs pairs with a `score` (a scored TripleTable's triples)")


def format_monot5(dataset: tf.data.Dataset, targets: TargetSpec = "true_false",
                  output_features: Optional[Features] = None,
                  bm25_in_input: bool = False) -> tf.data.Dataset:
  """Adds the monoT5 input text and the target word for the label; the words must be single pieces
  of the task's vocabulary (SeqIO passes `output_features`; T5's vocabulary when None).

  {"query": "what is a deductible", "document": "The amount you pay first.", "label": 1}
    -> same + {"inputs": "Query: what is a deductible Document: The amount you pay first. Relevant:",
               "targets": "true"}
  (with targets="hot_cold" the target would be "hot"; label 0 gives the negative word.)
  With `bm25_in_input` and "score": 14.2: "Query: what is a deductible BM25: 14 Document: ...".
  """
  positive, negative = target_texts(targets, features_vocabulary(output_features))

  def fmt(ex):
    _check_scores(ex, bm25_in_input)
    query = tf.strings.join([ex["query"], " ", _score_text(ex["score"])]) if bm25_in_input else (
        ex["query"])
    inputs = tf.strings.join(["Query: ", query, " Document: ", ex["document"], " Relevant:"])
    word = tf.where(ex["label"] > 0, tf.constant(positive), tf.constant(negative))
    return {**ex, "inputs": inputs, "targets": word}

  return dataset.map(fmt, num_parallel_calls=tf.data.AUTOTUNE)


def tokenize_monot5(dataset: tf.data.Dataset, output_features: Features,
                    sequence_length: Optional[Mapping[str, int]] = None,
                    bm25_in_input: bool = False) -> tf.data.Dataset:
  """Token ids as `t5rank.models.inputs.encode_pairs` makes them, plus the target word's id and EOS.

  The query and the document are tokenized separately and put between the template's words; when
  the input would pass `sequence_length["inputs"]` (512 when not given) the document is cut, then
  (only if needed) the query's end; "Relevant:" and EOS are always kept. Texts are kept as
  `inputs_pretokenized` / `targets_pretokenized`.

  {"query": "q", "document": "d", "label": 1, "inputs": "Query: q ...", "targets": "true"}
    -> {"query": ..., "document": ..., "label": 1,
        "inputs": [3, 27569, 10, <q ids>, 11167, 10, <d ids>, 31484, 17, 10, 1],
        "targets": [1176, 1],
        "inputs_pretokenized": "Query: q ...", "targets_pretokenized": "true"}
  With `bm25_in_input`, the ids of "BM25: 14" follow the query's (never cut, like the template).
  """
  import tensorflow_text as tf_text

  max_length = (sequence_length or {}).get("inputs") or DEFAULT_MAX_LENGTH
  ours = features_vocabulary(output_features)
  # The unmodified model, as `t5rank.models.vocab` uses it: SeqIO's copy adds the sentinels as pieces, so
  # it would read a literal "<extra_id_0>" in a document as one sentinel id, unlike the scorer.
  tokenizer = tf_text.SentencepieceTokenizer(model=ours.model_proto, out_type=tf.int32)
  marks = TemplateIds(ours)
  fixed = len(marks.query) + len(marks.document) + len(marks.relevant) + 1
  if fixed > max_length:
    raise ValueError(f"max_length {max_length} cannot hold the template itself ({fixed} tokens)")
  query_mark, document_mark = tf.constant(marks.query, tf.int32), tf.constant(marks.document, tf.int32)
  suffix = tf.constant(marks.relevant + [EOS_ID], tf.int32)

  def tokenize(ex):
    _check_scores(ex, bm25_in_input)
    score = (tokenizer.tokenize(_score_text(ex["score"])) if bm25_in_input
             else tf.zeros([0], tf.int32))
    fixed_here = fixed + tf.shape(score)[0]
    tf.debugging.assert_less_equal(fixed_here, max_length,
                                   message="max_length cannot hold the template and the score")
    query = tokenizer.tokenize(ex["query"])[:max_length - fixed_here]
    room = max_length - fixed_here - tf.shape(query)[0]
    document = tokenizer.tokenize(ex["document"])[:room]
    targets = tokenizer.tokenize(ex["targets"])
    return {**ex,
            "inputs": tf.concat([query_mark, query, score, document_mark, document, suffix], 0),
            "targets": tf.concat([targets, [EOS_ID]], 0),
            "inputs_pretokenized": ex["inputs"], "targets_pretokenized": ex["targets"]}

  return dataset.map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)


# ------------------------------------------------------------------------------------- duoT5


def split_triples_duo(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """Each triple becomes its two ordered pairs, the positive first in the first (label 1: document0
  is the more relevant), then the other order (label 0): class-balanced, as `split_triples`.

  {"query": "q", "positive": "p", "negative": "n"}
    -> {"query": "q", "document0": "p", "document1": "n", "label": 1},
       {"query": "q", "document0": "n", "document1": "p", "label": 0}
  Scored triples (+ "positive_score": 14.2, "negative_score": 9.7) give pairs with a "score" of
  each document: [14.2, 9.7], then [9.7, 14.2].
  """

  def pairs(ex):
    out = {"query": tf.stack([ex["query"], ex["query"]]),
           "document0": tf.stack([ex["positive"], ex["negative"]]),
           "document1": tf.stack([ex["negative"], ex["positive"]]),
           "label": tf.constant([1, 0], tf.int32)}
    if "positive_score" in ex:
      out["score"] = tf.stack([tf.stack([ex["positive_score"], ex["negative_score"]]),
                               tf.stack([ex["negative_score"], ex["positive_score"]])])
    return tf.data.Dataset.from_tensor_slices(out)

  return dataset.flat_map(pairs)


def format_duot5(dataset: tf.data.Dataset, targets: TargetSpec = "true_false",
                 output_features: Optional[Features] = None,
                 bm25_in_input: bool = False) -> tf.data.Dataset:
  """Adds the duoT5 input text and the target word for the label (as `format_monot5`).

  {"query": "q", "document0": "p", "document1": "n", "label": 1}
    -> same + {"inputs": "Query: q Document0: p Document1: n Relevant:", "targets": "true"}
  With `bm25_in_input` and "score": [14.2, 9.7]: "Query: q BM25: 14 Document0: p BM25: 10
  Document1: n Relevant:".
  """
  positive, negative = target_texts(targets, features_vocabulary(output_features))

  def fmt(ex):
    _check_scores(ex, bm25_in_input)
    score0, score1 = ((_score_text(ex["score"][0]) + " ", _score_text(ex["score"][1]) + " ")
                      if bm25_in_input else ("", ""))
    inputs = tf.strings.join(["Query: ", ex["query"], " ", score0, "Document0: ", ex["document0"],
                              " ", score1, "Document1: ", ex["document1"], " Relevant:"])
    word = tf.where(ex["label"] > 0, tf.constant(positive), tf.constant(negative))
    return {**ex, "inputs": inputs, "targets": word}

  return dataset.map(fmt, num_parallel_calls=tf.data.AUTOTUNE)


def tokenize_duot5(dataset: tf.data.Dataset, output_features: Features,
                   sequence_length: Optional[Mapping[str, int]] = None,
                   bm25_in_input: bool = False) -> tf.data.Dataset:
  """Token ids as `t5rank.models.duot5.DuoT5.encode` makes them (`t5rank.models.duot5.assemble`:
  the two documents share the room the query and the template leave, each up to half, a shorter
  one giving the rest to the other), plus the target word's id and EOS. With `bm25_in_input`, the
  ids of each document's "BM25: 14" precede its mark (never cut, like the template)."""
  import tensorflow_text as tf_text

  from t5rank.models.duot5 import DuoTemplateIds

  max_length = (sequence_length or {}).get("inputs") or DEFAULT_MAX_LENGTH
  ours = features_vocabulary(output_features)
  tokenizer = tf_text.SentencepieceTokenizer(model=ours.model_proto, out_type=tf.int32)
  marks = DuoTemplateIds(ours)
  fixed = (len(marks.query) + len(marks.document0) + len(marks.document1) + len(marks.relevant)
           + 1)
  if fixed > max_length:
    raise ValueError(f"max_length {max_length} cannot hold the template itself ({fixed} tokens)")
  query_mark = tf.constant(marks.query, tf.int32)
  first_mark, second_mark = (tf.constant(m, tf.int32) for m in (marks.document0, marks.document1))
  suffix = tf.constant(marks.relevant + [EOS_ID], tf.int32)

  def tokenize(ex):
    _check_scores(ex, bm25_in_input)
    if bm25_in_input:
      score0 = tokenizer.tokenize(_score_text(ex["score"][0]))
      score1 = tokenizer.tokenize(_score_text(ex["score"][1]))
    else:
      score0 = score1 = tf.zeros([0], tf.int32)
    fixed_here = fixed + tf.shape(score0)[0] + tf.shape(score1)[0]
    tf.debugging.assert_less_equal(fixed_here, max_length,
                                   message="max_length cannot hold the template and the scores")
    query = tokenizer.tokenize(ex["query"])[:max_length - fixed_here]
    room = max_length - fixed_here - tf.shape(query)[0]
    first, second = tokenizer.tokenize(ex["document0"]), tokenizer.tokenize(ex["document1"])
    kept_first = tf.minimum(tf.shape(first)[0], tf.maximum(room // 2, room - tf.shape(second)[0]))
    kept_second = tf.minimum(tf.shape(second)[0], room - kept_first)
    return {**ex,
            "inputs": tf.concat([query_mark, query, score0, first_mark, first[:kept_first], score1,
                                 second_mark, second[:kept_second], suffix], 0),
            "targets": tf.concat([tokenizer.tokenize(ex["targets"]), [EOS_ID]], 0),
            "inputs_pretokenized": ex["inputs"], "targets_pretokenized": ex["targets"]}

  return dataset.map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)


def query_records_to_triples(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """Per-query records (the TFDS InsuranceQA form) -> every (positive, negative) triple, in order.

  {"query": "q", "positives": ["p1", "p2"], "negatives": ["n1", "n2", "n3"]}
    -> {"query": "q", "positive": "p1", "negative": "n1"}, (p1, n2), (p1, n3), (p2, n1), ...
  """

  def triples(ex):
    positives, negatives = ex["positives"], ex["negatives"]
    n_pos, n_neg = tf.size(positives), tf.size(negatives)
    pos = tf.repeat(positives, n_neg)
    neg = tf.tile(negatives, [n_pos])
    return tf.data.Dataset.from_tensor_slices(
        {"query": tf.fill([n_pos * n_neg], ex["query"]), "positive": pos, "negative": neg})

  return dataset.flat_map(triples)
