"""RankT5's two families (#70): the Encoder-Decoder's score is the network's logit of <extra_id_10>
(32089) at the first decoder step of `Query: q Document: d` (no EOS), read from Google's t5x layout;
the Encoder-only's is a dense layer on the first encoder position (every interface:
tests/test_rankt5_interfaces.py; the published checkpoints: tests/test_rankt5_published.py)."""

from __future__ import annotations


import jax.numpy as jnp
import numpy as np
import pytest

from t5rank.models.network import T5
from t5rank.models.vocab import EOS_ID, load_vocabulary
from t5rank.testing import micro_config, random_params

QUERY = "does car insurance cover theft"
DOCUMENTS = ["Car insurance covers theft of the car.", "Life insurance pays a death benefit.",
             "Theft is not covered here."]


def by_hand_ids(vocab, query, document):
  """The input as google/rax examples/t5x/tasks.py writes it: `Query: q Document: d`, no EOS."""
  return (vocab.encode("Query:") + vocab.encode(query) + vocab.encode("Document:")
          + vocab.encode(document))


def network_logit(config, params, ids, token):
  """The full network, full vocabulary: the logit of `token` at the first decoder step."""
  logits = T5(config).apply({"params": params}, jnp.asarray([ids]), jnp.zeros((1, 1), jnp.int32))
  return float(logits[0, 0, token])


def test_the_score_token_is_extra_id_10_and_the_input_has_no_eos():
  from t5rank.models import rankt5

  vocab = load_vocabulary()
  assert rankt5.score_token_id(vocab) == 32089  # 32,000 pieces + 100 extra ids - 1 - 10
  domain = load_vocabulary("insuranceqa_en_8k")  # no extra ids: its <unk>, which text never yields
  assert domain.extra_ids == 0 and rankt5.score_token_id(domain) == domain.piece_to_id("<unk>") == 2
  reranker = rankt5.RankT5(micro_config(), vocab, max_length=64)
  (ids,) = reranker.encode([QUERY], [DOCUMENTS[0]])
  assert ids == by_hand_ids(vocab, QUERY, DOCUMENTS[0]) and ids[-1] != EOS_ID
  (cut,) = reranker.encode([QUERY], [" ".join(["theft"] * 100)])
  assert len(cut) == 64 and cut[:len(ids) - 9] == ids[:len(ids) - 9]  # the document is cut


def test_a_t5x_checkpoint_scores_the_logit_of_token_32089(tmp_path):
  """Google's published layout (t5x, `checkpoint_N/`, T5 1.0's tied embedding), written tiny."""
  from t5rank.models import rankt5
  from t5rank.models.t5_weights import load_checkpoint
  from t5rank.models.t5_weights.t5x import save_t5x_checkpoint

  config = micro_config()
  params = random_params(config, seed=3)
  save_t5x_checkpoint(str(tmp_path / "rankt5_base"), params, config, step=1049900)
  loaded_config, loaded = load_checkpoint(str(tmp_path / "rankt5_base"), config)
  vocab = load_vocabulary()
  reranker = rankt5.RankT5(loaded_config, vocab, max_length=64)
  examples = reranker.encode([QUERY] * 3, DOCUMENTS)
  scores = np.zeros(3)
  for batch in reranker.batches(examples, batch_tokens=256):
    got, probability = reranker.score_batch(loaded, batch.arrays)
    scores[batch.items] = np.asarray(got)[:len(batch.items)]
    np.testing.assert_allclose(probability, 1 / (1 + np.exp(-np.asarray(got))), rtol=1e-6)
  expected = [network_logit(config, params, by_hand_ids(vocab, QUERY, d), 32089)
              for d in DOCUMENTS]
  np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def rankt5_checkpoint(tmp_path_factory):
  from t5rank.models.t5_weights import save_checkpoint

  config = micro_config()
  params = random_params(config, seed=5)
  path = str(tmp_path_factory.mktemp("rankt5") / "model")
  save_checkpoint(path, params, config, {"model": "rankt5"})
  return path, config, params


def test_monot5_options_are_refused(rankt5_checkpoint):
  import t5rank

  with pytest.raises(ValueError, match="no target words"):
    t5rank.load(rankt5_checkpoint[0], targets="yes_no")
  with pytest.raises(ValueError, match="input ends with the document"):
    t5rank.load(rankt5_checkpoint[0], truncation="input")
  assert t5rank.load(rankt5_checkpoint[0], truncation="document").reranker.name == "rankt5"


@pytest.mark.parametrize("family", ["rankt5", "rankt5_encoder"])
def test_a_model_trained_with_bm25_in_its_input_reads_the_runs_scores(tmp_path, family):
  """`Query: q BM25: 12 Document: d` (as monoT5's, `t5rank.data.bm25_input`), written by the
  listwise trainer's export for a `_bm25_` task and read from its metadata by `t5rank.load` and
  `t5rank score`, which takes each candidate's score from the run."""
  import t5rank
  from t5rank.data.readers import read_run
  from t5rank.models import rankt5, rankt5_encoder
  from t5rank.training.listwise import RankT5EncoderListwise, RankT5Listwise

  vocab = load_vocabulary("insuranceqa_en_8k")
  config = micro_config().replace(vocab_size=8000)
  lengths = {"inputs": 48, "list_size": 4}
  path = str(tmp_path / "model")
  if family == "rankt5":
    trainable, params = RankT5Listwise(config), random_params(config, seed=5)
  else:
    encoder = rankt5_encoder.RankT5EncoderConfig(t5=config)
    trainable = RankT5EncoderListwise(encoder)
    params = rankt5_encoder.init_params(encoder, __import__("jax").random.PRNGKey(5))
  trainable.export(path, params, {"task_name": "insuranceqa_en_8k_pseudo_bm25_monot5_true_false",
                                  "feature_lengths": lengths})
  ranker = t5rank.load(path)
  assert ranker.family == family and ranker.reranker.reads_first_stage
  assert "BM25 score in the input" in ranker.reranker.describe()
  # by hand: the score's words between the query and the document, 12.4 rounded to 12
  ids = (vocab.encode("Query:") + vocab.encode(QUERY) + vocab.encode("BM25: 12")
         + vocab.encode("Document:") + vocab.encode(DOCUMENTS[0]))
  assert ranker.reranker.encode([QUERY], [DOCUMENTS[0]], [12.4]) == [ids]
  with pytest.raises(ValueError, match="reads each candidate's first-stage"):
    ranker.reranker.encode([QUERY], [DOCUMENTS[0]])
  assert not t5rank.load(path, bm25_in_input=False).reranker.reads_first_stage
  # t5rank score takes the run's scores: each document scored as the network scores its input
  (tmp_path / "q.tsv").write_text(f"q1\t{QUERY}\n")
  (tmp_path / "c.tsv").write_text("".join(f"d{i}\t{t}\n" for i, t in enumerate(DOCUMENTS)))
  bm25 = [14.0, 9.2, 3.6]
  (tmp_path / "r.run").write_text("".join(f"q1 Q0 d{i} {i + 1} {s} bm25\n"
                                          for i, s in enumerate(bm25)))
  from t5rank import cli
  assert cli.main(["score", "--checkpoint", path, "--queries", str(tmp_path / "q.tsv"),
                   "--corpus", str(tmp_path / "c.tsv"), "--run", str(tmp_path / "r.run"),
                   "--window", "0", "-o", str(tmp_path / "out.run")]) == 0
  got = dict(read_run(str(tmp_path / "out.run"))["q1"])
  for i, (document, score) in enumerate(zip(DOCUMENTS, bm25)):
    (ids,) = rankt5.encode_rankt5(vocab, [QUERY], [document], 48, [score])
    assert vocab.encode(f"BM25: {round(score)}")[0] in ids
    expected = ranker.reranker.score_batch(params, (np.asarray([ids], np.int32),))[0]
    np.testing.assert_allclose(got[f"d{i}"], float(expected[0]), rtol=1e-5, atol=1e-5)
  if family == "rankt5":  # that is the network's logit of the score token
    (ids,) = rankt5.encode_rankt5(vocab, [QUERY], [DOCUMENTS[1]], 48, [bm25[1]])
    np.testing.assert_allclose(got["d1"], network_logit(config, params, ids, 2), rtol=1e-4,
                               atol=1e-4)
