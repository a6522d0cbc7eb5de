"""The registrations `tasks/__init__.py` describes (import `tasks` or `t5rank.tasks`, not this
module by another name: seqio refuses a task registered twice)."""


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
