"""TFDS builders, so that `tfds.load(...)` works offline once this module is imported.

- `insuranceqa_v2/en`, `insuranceqa_v2/zh`: InsuranceQA v2 from the `insuranceqa-data` package,
  splits train / validation / test; one record per query:
  `{query_id, query, domain, positives: [answer texts], negatives: [answer texts]}` (negatives that
  are also relevant are left out). The train split of one language takes about 2 GB.
- `msmarco_passage_triples`: MS MARCO `triples.train.small.tsv` from a manual directory
  (`tfds.load(..., download_and_prepare_kwargs={"download_config":
  tfds.download.DownloadConfig(manual_dir=DIR)})`), split train, records `{query, positive,
  negative}` in file order.

Example: `tfds.load("insuranceqa_v2/zh", split="validation", data_dir="/tmp/tfds")`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import tensorflow_datasets as tfds

from t5rank.data import insuranceqa, sources

CITATION = """@inproceedings{feng2015applying,
  title={Applying deep learning to answer selection: A study and an open task},
  author={Feng, Minwei and Xiang, Bing and Glass, Michael R and Wang, Lidan and Zhou, Bowen},
  booktitle={ASRU}, year={2015}}"""


@dataclasses.dataclass
class InsuranceqaV2Config(tfds.core.BuilderConfig):
  """`language` is `en` or `zh`; `max_queries` keeps the first queries of each split (tests)."""
  language: str = "en"
  max_queries: Optional[int] = None


class InsuranceqaV2(tfds.core.GeneratorBasedBuilder):
  """InsuranceQA v2 answer selection, English or Chinese, from the `insuranceqa-data` package."""

  VERSION = tfds.core.Version("2.0.0")
  BUILDER_CONFIGS = [InsuranceqaV2Config(name="en", language="en"),
                     InsuranceqaV2Config(name="zh", language="zh")]

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict({
            "query_id": tfds.features.Text(),
            "query": tfds.features.Text(),
            "domain": tfds.features.Text(),
            "positives": tfds.features.Sequence(tfds.features.Text()),
            "negatives": tfds.features.Sequence(tfds.features.Text()),
        }),
        homepage="https://github.com/shuzi/insuranceQA",
        citation=CITATION)

  def _split_generators(self, dl_manager):
    del dl_manager
    return {split: self._generate_examples(split) for split in insuranceqa.SPLITS}

  def _generate_examples(self, split: str):
    language = self.builder_config.language
    records, answers = insuranceqa.load_records(split, language)
    data = insuranceqa.split_of(records, answers, language, self.builder_config.max_queries)
    for qid, query in data.queries.items():
      yield qid, {
          "query_id": qid,
          "query": query,
          "domain": records[qid].get("domain", ""),
          "positives": [data.answers[a] for a in data.relevant[qid]],
          "negatives": [data.answers[a] for a in data.negatives[qid]],
      }


class MsmarcoPassageTriples(tfds.core.GeneratorBasedBuilder):
  """MS MARCO passage training triples (`query, positive, negative`) from a local file."""

  VERSION = tfds.core.Version("1.0.0")
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      "Put triples.train.small.tsv (query<TAB>positive<TAB>negative, from "
      "https://microsoft.github.io/msmarco/) in the manual directory.")

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict({
            "query": tfds.features.Text(),
            "positive": tfds.features.Text(),
            "negative": tfds.features.Text(),
        }),
        homepage="https://microsoft.github.io/msmarco/")

  def _split_generators(self, dl_manager):
    return {"train": self._generate_examples(
        os.path.join(dl_manager.manual_dir, "triples.train.small.tsv"))}

  def _generate_examples(self, path: str):
    table = sources.read_triples_tsv(path)
    for i, (query, positive, negative) in enumerate(table.triples(shuffle=False, num_epochs=1)):
      yield i, {"query": query, "positive": positive, "negative": negative}
