"""Cross-lingual training triples (t5rank.data.cross_lingual) on InsuranceQA's first training queries."""

import collections

import pytest
import seqio

import t5rank.tasks  # noqa: F401  (registers the tasks)
from t5rank.data.cross_lingual import cross_lingual_table
from t5rank.data.insuranceqa import load_split

N = 8  # training queries


def layout(table, num_answers):
  """Per positive row: (query language, passage language, negative languages, answer index)."""
  zh_queries = set(load_split("train", "zh", N).queries.values())
  rows = []
  for row, (q, d) in enumerate(table.positives):
    pool = table.positive_pools[row]
    negatives = table.pool_docs[table.pool_starts[pool]:table.pool_starts[pool + 1]]
    rows.append(("zh" if table.queries[q] in zh_queries else "en",
                 "zh" if d >= num_answers else "en",
                 {"zh" if n >= num_answers else "en" for n in negatives},
                 int(d) % num_answers))
  return rows


@pytest.fixture(scope="module")
def english():
  return load_split("train", "en", N)


def test_one_language_tables_are_the_monolingual_triples(english):
  en = cross_lingual_table("train", "en", num_queries=N)
  zh = cross_lingual_table("train", "zh", num_queries=N)
  A = len(english.answers)
  assert len(en.documents) == 2 * A and len(en) == len(zh) == sum(
      len(english.relevant[q]) for q in english.queries if english.negatives[q])
  assert {r[:2] for r in layout(en, A)} == {("en", "en")}
  assert {r[:2] for r in layout(zh, A)} == {("zh", "zh")}
  assert all(r[2] == {r[1]} for r in layout(zh, A))  # negatives in the passage's language
  # the first row: the first query's first relevant answer, its text in each language
  chinese = load_split("train", "zh", N)
  q0 = next(iter(english.queries))
  a0 = english.relevant[q0][0]
  assert en.queries[en.positives[0][0]] == english.queries[q0]
  assert en.documents[en.positives[0][1]] == english.answers[a0]
  assert zh.documents[zh.positives[0][1]] == chinese.answers[a0]


def test_merged_and_mixed_have_the_same_amount_of_data_and_mixed_half_translated(english):
  A = len(english.answers)
  M = len(cross_lingual_table("train", "en", num_queries=N))
  merged = layout(cross_lingual_table("train", "merged", num_queries=N), A)
  mixed = layout(cross_lingual_table("train", "mixed", seed=0, num_queries=N), A)
  assert len(merged) == len(mixed) == 2 * M
  assert collections.Counter(r[:2] for r in merged) == {("en", "en"): M, ("zh", "zh"): M}
  counts = collections.Counter(r[:2] for r in mixed)
  assert counts == {("en", "zh"): M // 2, ("zh", "zh"): M // 2,
                    ("en", "en"): M - M // 2, ("zh", "en"): M - M // 2}
  assert all(r[2] == {r[1]} for r in mixed)
  # a pair and its translation share the passage (language included): same answers both sides
  passages = collections.Counter((r[3], r[1]) for r in mixed)
  assert all(v % 2 == 0 for v in passages.values())
  other = layout(cross_lingual_table("train", "mixed", seed=1, num_queries=N), A)
  assert sorted(other) != sorted(mixed)  # another seed translates another half


def test_the_tasks_are_on_the_bilingual_vocabulary():
  task = seqio.get_mixture_or_task("insuranceqa_xling_mixed_monot5_yes_no")
  assert task.output_features["inputs"].vocabulary.vocab_size == 16100
  with pytest.raises(ValueError, match="unknown cross-lingual strategy"):
    cross_lingual_table("train", "cascade")


def test_mt5_tasks_register_without_the_file_and_read_it_from_the_environment(monkeypatch):
  from t5rank.models import vocab

  monkeypatch.setenv(vocab.MT5_VOCABULARY_ENV, "/nonexistent/mt5.model")
  with pytest.raises(FileNotFoundError, match="copy gs://t5-data/vocabs/mc4.250000.100extra"):
    vocab.load_vocabulary("mt5")
  # a stand-in file (the bilingual vocabulary): the name resolves to whatever the variable names
  monkeypatch.setenv(vocab.MT5_VOCABULARY_ENV, vocab.VOCABULARIES["insuranceqa_enzh_16k"][0])
  assert vocab.vocabulary_file("mt5") == (vocab.VOCABULARIES["insuranceqa_enzh_16k"][0], 100)
  assert "insuranceqa_xling_mixed_mt5_monot5_yes_no" in seqio.TaskRegistry.names()
  assert "xpi_bm25_mt5_monot5_yes_no" in seqio.TaskRegistry.names()
