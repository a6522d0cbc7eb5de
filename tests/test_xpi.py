"""XPI pairs (t5rank.data.xpi): meaning groups, the paper's layout, positives and negatives."""

import collections

import pytest
import seqio

import t5rank.tasks  # noqa: F401  (registers the tasks)
from t5rank.data import xpi


def test_translation_links_form_meaning_groups():
  pairs = [("我們試試看！", "Let's try it."), ("我們試試看！", "Let's do it."),
           ("我该睡觉了。", "I have to go to bed."), ("我该上床了。", "I have to go to bed."),
           ("猫", "Cat.")]
  assert xpi.meaning_groups(pairs) == [
      (("Let's try it.", "Let's do it."), ("我們試試看！",)),
      (("I have to go to bed.",), ("我该睡觉了。", "我该上床了。")),
      (("Cat.",), ("猫",))]


def test_a_quarter_english_a_quarter_chinese_half_mixed():
  layout = xpi.layouts(103, seed=0)
  counts = collections.Counter(layout)
  assert counts[("en", "en")] == 25 and counts[("zh", "zh")] == 26  # 103 // 4 and 103 // 2 - 103 // 4
  assert counts[("en", "zh")] + counts[("zh", "en")] == 52
  assert 0 < counts[("en", "zh")] < 52  # the coin picks the translated side
  assert xpi.layouts(103, seed=1) != layout


def groups(n):
  """n meanings: English "sentence i" / Chinese "句子 i"; meaning 0 has an English paraphrase and
  meaning 1 a Chinese one."""
  out = [((f"sentence {i}",), (f"句子 {i}",)) for i in range(n)]
  out[0] = (("sentence 0", "phrase 0"), ("句子 0",))
  out[1] = (("sentence 1",), ("句子 1", "短语 1"))
  return out


@pytest.mark.parametrize("negatives", ["random", "bm25"])
def test_positives_mean_the_same_and_negatives_are_other_meanings_in_ys_language(negatives):
  data = groups(40)
  table = xpi.xpi_table_of(data, negatives, seed=3)
  layout = xpi.layouts(40, seed=3)
  assert len(table) == 40
  for g, (lang_x, lang_y) in enumerate(layout):
    q, d = table.positives[g]
    x, y = table.queries[q], table.documents[d]
    side = {"en": 0, "zh": 1}
    assert x == data[g][side[lang_x]][0]
    if lang_x != lang_y:
      assert y == data[g][side[lang_y]][0]  # its translation
    elif len(data[g][side[lang_y]]) > 1:
      assert y == data[g][side[lang_y]][1]  # a paraphrase
    else:
      assert y == x
    pool = table.pool_docs[table.pool_starts[g]:table.pool_starts[g + 1]]
    negatives_text = [table.documents[i] for i in pool]
    assert len(negatives_text) == xpi.NUM_NEGATIVES == len(set(negatives_text))
    assert set(negatives_text).isdisjoint(data[g][0] + data[g][1])  # other meanings only
    assert all(t.startswith("sentence" if lang_y == "en" else "句子") for t in negatives_text)


def test_bm25_negatives_share_words_with_the_positive():
  # meanings 0..29; 30 and 31 share "premium" with meaning 2's English sentence
  data = [((f"sentence {i}",), (f"句子 {i}",)) for i in range(30)]
  data[2] = (("the premium is due monthly",), ("保费每月到期",))
  data += [(("a premium for renters",), ("租客保费",)), (("premium payment options",), ("保费支付",))]
  for seed in range(40):  # find a seed that lays meaning 2 out as English-English
    if xpi.layouts(len(data), seed)[2] == ("en", "en"):
      break
  table = xpi.xpi_table_of(data, "bm25", seed=seed)
  pool = table.pool_docs[table.pool_starts[2]:table.pool_starts[3]]
  assert [table.documents[i] for i in pool][:2] == ["a premium for renters", "premium payment options"]


def test_splits_errors_and_tasks():
  with pytest.raises(ValueError, match="XPI's splits"):
    xpi.parallel_groups("test")
  with pytest.raises(ValueError, match="XPI negatives"):
    xpi.xpi_table_of(groups(40), "hard")
  with pytest.raises(ValueError, match="more than 20 meaning groups"):
    xpi.xpi_table_of(groups(10))
  task = seqio.get_mixture_or_task("xpi_bm25_monot5_yes_no")
  assert task.output_features["targets"].vocabulary.vocab_size == 16100


def test_the_dual_encoders_xpi_pairs_are_the_tables_rows():
  from t5rank.data.dual_pairs import PAIR_SOURCES, Pairs, distinct_batches
  data = groups(40)
  table = xpi.xpi_table_of(data, "random", seed=3)
  pairs = Pairs.of_table(table)
  assert len(pairs.pairs) == 40 and PAIR_SOURCES["xpi_enzh"] == ("enzh", "xpi")
  for g, (q, d) in enumerate(pairs.pairs):
    x, y = pairs.questions[q], pairs.answers[d]
    assert (x, y) == (table.queries[table.positives[g][0]], table.documents[table.positives[g][1]])
    assert x in data[g][0] + data[g][1] and y in data[g][0] + data[g][1]  # one meaning
    pool = table.pool_docs[table.pool_starts[g]:table.pool_starts[g + 1]].tolist()
    assert pairs.negatives[q] == pool
  batch = next(distinct_batches(pairs.batch_keys, 40, seed=0))  # every meaning once
  assert sorted(batch) == list(range(40))
