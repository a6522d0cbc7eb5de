"""TK (Hofstätter et al. 2019): the kernels and pooling equal the paper's equations on numbers small
enough to work out by hand; the reranker's deduplicated, two-stage scoring equals the network on
each pair; the edge cases (empty texts, unknown words, a TK checkpoint given monoT5 options)."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from t5rank.models import tk
from t5rank.models.batching import pad_rows
from t5rank.models.tk_reranker import TK
from t5rank.models.words import UNK_ID, WordVocabulary, words

TEXTS = ["the car insurance covers the car", "life insurance pays a death benefit",
         "an annuity pays income", "the deductible of car insurance", "what does life insurance pay",
         "does car insurance cover rental cars"]


def small_config(vocabulary: WordVocabulary, **fields) -> tk.TKConfig:
  return tk.TKConfig(vocab_size=vocabulary.size, vocabulary_sha256=vocabulary.sha256,
                     embedding_dim=8, num_heads=2, head_dim=4, ff_dim=8, max_query_length=6,
                     max_document_length=12, **fields)


@pytest.fixture(scope="module")
def vocabulary():
  return WordVocabulary.build(TEXTS, min_count=1)


def test_words_and_vocabulary(tmp_path):
  assert words("Is AD&D covered? Yes_2 it's") == ["is", "ad", "d", "covered", "yes_2", "it", "s"]
  # Chinese: each ideograph a word (BERT's rule), Latin runs and digits beside them as before
  assert words("人寿保险covers 2人。É?") == ["人", "寿", "保", "险", "covers", "2", "人", "é"]
  vocabulary = WordVocabulary.build(["b a a", "c a b"], min_count=2)
  assert vocabulary.terms == ["a", "b"] and vocabulary.counts == [3, 2]  # c occurs once
  ids, oov, n = vocabulary.encode("A b c d", max_length=3)
  assert ids.tolist() == [2, 3, UNK_ID] and (oov, n) == (1, 3)
  vocabulary.save(str(tmp_path / "words.tsv"))
  assert WordVocabulary.load(str(tmp_path)).sha256 == vocabulary.sha256
  (tmp_path / "bad.tsv").write_text("a\t3\nb\n")
  with pytest.raises(ValueError, match="bad.tsv:2"):
    WordVocabulary.load(str(tmp_path / "bad.tsv"))


def test_a_word_list_made_by_another_splitting_rule_is_rebuilt(tmp_path, monkeypatch):
  from t5rank.data import word_embeddings as words_module
  built = []
  monkeypatch.setattr(words_module, "collection_texts", lambda language: ["a b a", "b a"])
  monkeypatch.setattr(words_module, "train_word2vec",
                      lambda texts, vocabulary, **kw: built.append(1) or np.zeros((vocabulary.size, 4)))
  directory = str(tmp_path / "w")
  assert words_module.insuranceqa_embeddings(directory, min_count=1, dim=4) == directory
  assert words_module.insuranceqa_embeddings(directory, min_count=1, dim=4) == directory
  assert len(built) == 1  # the second call found the list made with these settings
  settings = tmp_path / "w" / "embeddings.json"
  stored = json.loads(settings.read_text())
  assert stored["words"] == words_module.WORDS_RULE
  del stored["words"]  # a list made before Chinese characters were split apart
  settings.write_text(json.dumps(stored))
  words_module.insuranceqa_embeddings(directory, min_count=1, dim=4)
  assert len(built) == 2


def test_kernel_pooling_by_hand():
  # One query term, two document terms with cosines 1 and 0; kernels at 1 and 0 with
  # 2 sigma^2 = 1, so K = exp(-(M - mu)^2): each kernel sums to 1 + e^-1 over the document.
  sigma = 1 / math.sqrt(2)
  match = jnp.array([[[1.0, 0.0]]])
  s_log, s_len, per_term = tk.kernel_pooling(match, jnp.array([[True]]), jnp.array([[True, True]]),
                                             (1.0, 0.0), sigma)
  k = 1 + math.exp(-1)
  np.testing.assert_allclose(per_term[0, 0], [k, k], rtol=1e-6)  # (6)
  np.testing.assert_allclose(s_log[0], [math.log2(k)] * 2, rtol=1e-6)  # (7) log base 2
  np.testing.assert_allclose(s_len[0], [k / 2] * 2, rtol=1e-6)  # (8) divided by d_len = 2
  # The second document term is padding: only cosine 1 counts, d_len = 1.
  s_log, s_len, _ = tk.kernel_pooling(match, jnp.array([[True]]), jnp.array([[True, False]]),
                                      (1.0, 0.0), sigma)
  np.testing.assert_allclose(s_log[0], [0.0, math.log2(math.exp(-1))], atol=1e-6)
  np.testing.assert_allclose(s_len[0], [1.0, math.exp(-1)], rtol=1e-6)
  # A padded query term adds nothing; an empty document gives log2(1e-10) per real query term.
  match = jnp.zeros((1, 2, 2))
  s_log, s_len, _ = tk.kernel_pooling(match, jnp.array([[True, False]]),
                                      jnp.array([[False, False]]), (1.0,), 0.1)
  np.testing.assert_allclose(s_log[0], [math.log2(1e-10)], rtol=1e-6)
  assert float(s_len[0, 0]) == 0.0


def test_cosine_matrix_and_final_score_by_hand(vocabulary):
  m = tk.cosine_matrix(jnp.array([[[3.0, 4.0], [0.0, 0.0]]]), jnp.array([[[4.0, 3.0], [0.0, 2.0]]]))
  np.testing.assert_allclose(m[0], [[24 / 25, 4 / 5], [0.0, 0.0]], rtol=1e-6)  # (4), zero row: 0
  config = small_config(vocabulary)
  params = tk.init_tk_params(config, jax.random.PRNGKey(0))
  network = tk.TKNetwork(config)
  q = jnp.array([[2, 3, 4, 0, 0, 0]])
  d = jnp.array([[5, 2, 6, 3, 0, 0, 0, 0, 0, 0, 0, 0]])
  score, parts = network.apply({"params": params}, network.apply({"params": params}, q,
                                                                 method=tk.TKNetwork.encode),
                               q > UNK_ID, network.apply({"params": params}, d,
                                                         method=tk.TKNetwork.encode),
                               d > UNK_ID, method=tk.TKNetwork.score)
  expected = (params["combine"][0] * parts["s_log_k"] @ params["log_weights"]
              + params["combine"][1] * parts["s_len_k"] @ params["length_weights"])  # (9), (10)
  np.testing.assert_allclose(score, expected, rtol=1e-6)


def test_hybrid_contextualization_mixes_by_alpha(vocabulary):
  config = small_config(vocabulary)
  params = tk.init_tk_params(config, jax.random.PRNGKey(1))
  ids = jnp.array([[2, 3, UNK_ID, 4, 0, 0]])
  encode = lambda p: tk.TKNetwork(config).apply({"params": p}, ids, method=tk.TKNetwork.encode)
  only_words = encode(dict(params, alpha=jnp.array(1.0)))  # alpha = 1: the embeddings themselves
  np.testing.assert_allclose(only_words[0, 0], params["embedding"]["embedding"][2], rtol=1e-6)
  half = encode(params)  # alpha starts at .5
  assert float(params["alpha"]) == 0.5
  context = encode(dict(params, alpha=jnp.array(0.0)))
  np.testing.assert_allclose(half, 0.5 * only_words + 0.5 * context, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(half[0, 2], 0.0)  # the unknown word is masked out
  np.testing.assert_array_equal(half[0, 4:], 0.0)  # padding too


def direct_scores(config, params, vocabulary, queries, passages):
  """Each pair through the network on its own: the reference for the reranker's batching."""
  network = tk.TKNetwork(config)
  out = []
  members = params if config.ensemble > 1 else jax.tree.map(lambda x: x[None], params)
  for q, d in zip(queries, passages):
    qi = np.zeros((1, config.max_query_length), np.int32)
    di = np.zeros((1, config.max_document_length), np.int32)
    ids = vocabulary.encode(q, config.max_query_length)[0]
    qi[0, :len(ids)] = ids
    ids = vocabulary.encode(d, config.max_document_length)[0]
    di[0, :len(ids)] = ids
    member_scores = [float(network.apply({"params": jax.tree.map(lambda x: x[i], members)},
                                         jnp.asarray(qi), jnp.asarray(di))[0])
                     for i in range(config.ensemble)]
    out.append(np.mean(member_scores))
  return np.array(out)


@pytest.mark.parametrize("fields", [{}, {"windows": (3, 5), "window_top": 2}])
def test_reranker_scores_equal_the_network_pair_by_pair(vocabulary, fields):
  from t5rank.ranking.scorer import score_pairs

  config = small_config(vocabulary, **fields)
  params = tk.init_tk_params(config, jax.random.PRNGKey(2))
  queries = [TEXTS[4], TEXTS[5], TEXTS[4], "", TEXTS[5], "zzz unknown"]
  passages = [TEXTS[0], TEXTS[0], TEXTS[1], TEXTS[2], "", TEXTS[3]]  # TEXTS[0] read by two queries
  reranker = TK(config, vocabulary)
  scores, _ = score_pairs(reranker, params, queries, passages, batch_tokens=24)
  assert np.isfinite(scores).all()  # the empty query and document score finitely
  np.testing.assert_allclose(scores, direct_scores(config, params, vocabulary, queries, passages),
                             rtol=1e-5, atol=1e-5)
  examples = reranker.encode(queries, passages)
  batches = reranker.batches(examples, batch_tokens=24)
  assert sorted(i for b in batches for i in b.items) == list(range(len(queries)))
  docs_per_batch = [len({examples[i][1].tobytes() for i in b.items}) for b in batches]
  assert sum(docs_per_batch) == 5  # five distinct documents, each in one batch only


def test_one_window_covering_the_document_is_the_plain_score(vocabulary):
  plain = small_config(vocabulary)
  windowed = small_config(vocabulary, windows=(12,), window_top=1)
  params = tk.init_tk_params(windowed, jax.random.PRNGKey(3))
  q, d = jnp.array([[2, 3, 4, 0, 0, 0]]), jnp.array([[5, 2, 6, 3, 7] + [0] * 7])
  a = tk.TKNetwork(plain).apply({"params": {k: v for k, v in params.items()
                                            if k != "window_weights"}}, q, d)
  b = tk.TKNetwork(windowed).apply({"params": params}, q, d)
  np.testing.assert_allclose(a, b, rtol=1e-6)


def test_ensemble_averages_its_members(vocabulary):
  from t5rank.ranking.scorer import score_pairs

  one = small_config(vocabulary)
  members = [tk.init_tk_params(one, jax.random.PRNGKey(s)) for s in (4, 5)]
  config = one.replace(ensemble=2)
  stacked = jax.tree.map(lambda *x: jnp.stack(x), *members)
  queries, passages = [TEXTS[4], TEXTS[5]], [TEXTS[1], TEXTS[3]]
  scores, _ = score_pairs(TK(config, vocabulary), stacked, queries, passages)
  each = [score_pairs(TK(one, vocabulary), p, queries, passages)[0] for p in members]
  np.testing.assert_allclose(scores, (each[0] + each[1]) / 2, rtol=1e-5)


def test_reranker_refuses_another_word_list(vocabulary):
  config = small_config(vocabulary)
  with pytest.raises(ValueError, match="is not the word list this TKConfig was built with"):
    TK(config, WordVocabulary.build(["other words entirely"], min_count=1))


def tiny_run(tmp_path, vocabulary, steps=2):
  """Trains a tiny TK for `steps` steps through `t5rank.training.trainer.train`; its MODEL_DIR."""
  from t5rank.data.sources import TripleTable
  from t5rank.data import tk_triples
  from t5rank.training import pairwise, trainer

  words_dir = tmp_path / "words"
  words_dir.mkdir(exist_ok=True)
  vocabulary.save(str(words_dir / "words.tsv"))
  config = small_config(vocabulary, words=str(words_dir))
  table = TripleTable(queries=[TEXTS[4], TEXTS[5]], documents=TEXTS[:4],
                      positives=np.array([[0, 1], [1, 0]]), positive_pools=np.array([0, 1]),
                      pool_starts=np.array([0, 2, 4]), pool_docs=np.array([2, 3, 1, 2]))

  def dataset(task_name, *, batch_size, feature_lengths, seed, start_step, pack, shard_index,
              num_shards):
    return tk_triples.tk_batches(table, vocabulary, batch_size=batch_size,
                                 query_length=feature_lengths["query"],
                                 document_length=feature_lengths["document"], seed=seed,
                                 start_step=start_step, shard_index=shard_index,
                                 num_shards=num_shards)

  model_dir = str(tmp_path / "run")
  metrics = trainer.train(
      model_config=config, task_name="insuranceqa_en", feature_lengths={"query": 6, "document": 12},
      train_steps=steps, batch_size=4, model_dir=model_dir, mesh_shape=(1, 1),
      optimization=trainer.Optimization(learning_rate=1e-3, optimizer=pairwise.tk_adam,
                                        dropout_rate=0.0),
      loop=trainer.Loop(log_every=1, checkpoint_every=steps), dataset_fn=dataset)
  return model_dir, metrics


def test_hinge_loss_by_hand():
  from t5rank.training.pairwise import hinge_loss
  # max(0, 1 - 2 + 0) = 0, max(0, 1 - 0.5 + 0) = 0.5, max(0, 1 - 0 + 1) = 2
  np.testing.assert_allclose(hinge_loss(jnp.array([2.0, 0.5, 0.0]), jnp.array([0.0, 0.0, 1.0])),
                             2.5 / 3)


def test_the_trainer_trains_tk_and_the_checkpoint_scores_and_explains(tmp_path, vocabulary):
  from t5rank import cli
  from t5rank.models.loading import load_reranker
  from t5rank.models.t5_weights import load_checkpoint
  from t5rank.ranking.scorer import score_pairs

  model_dir, metrics = tiny_run(tmp_path, vocabulary)
  assert np.isfinite(metrics["loss"]) and 0 <= metrics["accuracy"] <= 1
  reranker, params = load_reranker(f"{model_dir}/final")
  assert isinstance(reranker, TK) and reranker.vocabulary.sha256 == vocabulary.sha256
  scores, _ = score_pairs(reranker, params, [TEXTS[4]], [TEXTS[1]])
  assert np.isfinite(scores).all()
  with pytest.raises(ValueError, match="TK checkpoint; the options targets are not its own"):
    load_reranker(f"{model_dir}/final", options={"targets": "yes_no"})
  with pytest.raises(ValueError, match="is a TK checkpoint, not a T5 one"):
    load_checkpoint(f"{model_dir}/final")
  out = tmp_path / "why.html"
  assert cli.main(["explain", "--checkpoint", f"{model_dir}/final", "--query", TEXTS[4],
                   "--document", TEXTS[1], "--document", "zzz " + TEXTS[2],
                   "--output", str(out)]) == 0
  page = out.read_text()
  assert page.count('class="doc"') == 2 and '<span class="o">zzz</span>' in page
  assert (tmp_path / "why.png").stat().st_size > 10_000
  assert cli.main(["ensemble", f"{model_dir}/final", f"{model_dir}/final",
                   "--output", str(tmp_path / "ens")]) == 0
  ensemble, stacked = load_reranker(str(tmp_path / "ens"))
  assert ensemble.config.ensemble == 2
  np.testing.assert_allclose(score_pairs(ensemble, stacked, [TEXTS[4]], [TEXTS[1]])[0], scores,
                             rtol=1e-5)


def test_query_terms_are_packed_in_rows_and_score_as_the_network(vocabulary):
  from t5rank.models import tk_reranker
  from t5rank.ranking.scorer import score_pairs

  config = small_config(vocabulary).replace(max_query_length=30)
  params = tk.init_tk_params(config, jax.random.PRNGKey(6))
  long_query = " ".join(TEXTS)  # 30 words after the cap
  queries = [long_query, TEXTS[4], long_query, long_query]  # distinct: long 0, TEXTS[4] (5 words) 1
  passages = [TEXTS[0], TEXTS[0], TEXTS[2], TEXTS[0]]
  reranker = TK(config, vocabulary)
  assert tk_reranker.TERMS_PER_ROW == 64
  # row counts: the next of 2^k and 3 * 2^(k-1), a multiple of 8
  assert [pad_rows(n, 8) for n in (3, 20, 33, 49, 700)] == [8, 24, 48, 64, 768]
  [batch] = reranker.batches(reranker.encode(queries, passages), batch_tokens=24)
  doc_ids, row_doc, query, offset, pair, mask, pair_row, item_slot = batch.arrays
  # One group of 24 // 12 = 2 documents. TEXTS[0] is read by examples 0, 1, 3 (local pairs 0, 1,
  # 2): 30 + 5 + 30 = 65 terms in two rows, pair 2 continuing on the second; TEXTS[2] by example 2
  # (local pair 3): one row. Rows: 1.5 per document x 2 = 3, padded to 8.
  assert doc_ids.shape == (1, 2, 12) and row_doc.tolist() == [[0, 0, 1, 0, 0, 0, 0, 0]]
  assert pair[0, 0].tolist() == [0] * 30 + [1] * 5 + [2] * 29 and pair[0, 1, 0] == 2
  assert offset[0, 0].tolist() == list(range(30)) + list(range(5)) + list(range(29))
  assert offset[0, 1, 0] == 29 and query[0, 0, 30:35].tolist() == [1] * 5
  assert mask[0, 0].all() and mask[0, 1].tolist() == [True] + [False] * 63
  assert pair[0, 2, :30].tolist() == [3] * 30 and mask[0, 2].sum() == 30 and not mask[0, 3:].any()
  assert pair_row[0, :4].tolist() == [0, 0, 0, 2] and item_slot[:4].tolist() == [0, 1, 2, 3]
  assert batch.items.tolist() == [0, 1, 3, 2]
  scores, _ = score_pairs(reranker, params, queries, passages, batch_tokens=24)
  np.testing.assert_allclose(scores, direct_scores(config, params, vocabulary, queries, passages),
                             rtol=1e-5, atol=1e-5)


def test_query_table_is_kept_across_shards_of_one_run(vocabulary, monkeypatch):
  from t5rank.models import tk_reranker
  from t5rank.ranking.devices import scoring_mesh

  config = small_config(vocabulary)
  params = tk.init_tk_params(config, jax.random.PRNGKey(7))
  reranker, mesh = TK(config, vocabulary), scoring_mesh()
  first = reranker.encode([TEXTS[4], TEXTS[5]], [TEXTS[0], TEXTS[1]])
  state = reranker.shard_state(params, first, mesh=mesh)
  table = reranker._table
  assert table["used"] == 5 + 6 and state["terms"].shape[1] == 32  # capacity: 2 x 11 -> 32
  second = reranker.encode([TEXTS[5], TEXTS[4]], [TEXTS[2], TEXTS[3]])
  calls = []
  real = tk_reranker._query_terms
  monkeypatch.setattr(tk_reranker, "_query_terms",
                      lambda *a, **k: calls.append(1) or real(*a, **k))
  state2 = reranker.shard_state(params, second, mesh=mesh)  # same params: nothing to encode
  assert not calls and reranker._table["used"] == 11
  # the second shard's query 0 is TEXTS[5], whose terms follow TEXTS[4]'s in the table
  assert state2["query_start"][:2].tolist() == [5, 0]
  np.testing.assert_array_equal(state2["terms"], state["terms"])
  reranker.shard_state(jax.tree.map(lambda x: x + 0, params), second, mesh=mesh)
  assert len(calls) == 1  # other parameters: a new table, both queries in one call
