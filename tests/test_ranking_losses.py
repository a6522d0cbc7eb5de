"""RankT5's ranking losses (t5rank.training.ranking_losses) on numbers worked out by hand.

The list of every test: scores s = (ln 2, 0, 0), labels y = (1, 0, 0) (graded, (2, 1, 0), in the
last); e^s = (2, 1, 1), so the first document's softmax probability is 2 / 4 = 1/2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from t5rank.training import ranking_losses

SCORES = np.array([[math.log(2.0), 0.0, 0.0]], np.float32)
LABELS = np.array([[1.0, 0.0, 0.0]], np.float32)
MASK = np.ones((1, 3), bool)


def with_padding(scores, labels, mask):
  """The same list with a fourth, padding entry whose score would dominate were it counted."""
  return (np.concatenate([scores, [[50.0]]], 1).astype(np.float32),
          np.concatenate([labels, [[1.0]]], 1).astype(np.float32),
          np.concatenate([mask, [[False]]], 1))


def test_softmax_cross_entropy_is_minus_log_one_half():
  # -log(2 / (2 + 1 + 1)) = ln 2
  loss = ranking_losses.softmax_cross_entropy(SCORES, LABELS, MASK)
  assert float(loss) == pytest.approx(math.log(2.0), abs=1e-6)
  assert float(ranking_losses.softmax_cross_entropy(*with_padding(SCORES, LABELS, MASK))) == (
      pytest.approx(math.log(2.0), abs=1e-6))


def test_poly1_adds_epsilon_times_one_minus_p():
  # ln 2 + 1 * (1 - 1/2); with epsilon 0.5: ln 2 + 0.25
  assert float(ranking_losses.poly1_softmax(SCORES, LABELS, MASK)) == pytest.approx(
      math.log(2.0) + 0.5, abs=1e-6)
  assert float(ranking_losses.poly1_softmax(SCORES, LABELS, MASK, epsilon=0.5)) == pytest.approx(
      math.log(2.0) + 0.25, abs=1e-6)
  assert float(ranking_losses.poly1_softmax(*with_padding(SCORES, LABELS, MASK))) == (
      pytest.approx(math.log(2.0) + 0.5, abs=1e-6))


def test_pairwise_logistic_sums_the_two_ordered_pairs():
  # pairs (1, 2) and (1, 3): 2 * log(1 + e^{-ln 2}) = 2 ln 1.5
  assert float(ranking_losses.pairwise_logistic(SCORES, LABELS, MASK)) == pytest.approx(
      2 * math.log(1.5), abs=1e-6)
  assert float(ranking_losses.pairwise_logistic(*with_padding(SCORES, LABELS, MASK))) == (
      pytest.approx(2 * math.log(1.5), abs=1e-6))


def test_the_batch_mean_skips_lists_without_a_relevant_document():
  # a second list (1/3 each, no relevant document) adds nothing; a third, all equal scores with one
  # relevant of three: -log(1/3) = ln 3; the mean of ln 2 and ln 3
  scores = np.array([[math.log(2.0), 0, 0], [0, 0, 0], [0, 0, 0]], np.float32)
  labels = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 0]], np.float32)
  loss = ranking_losses.softmax_cross_entropy(scores, labels, np.ones((3, 3), bool))
  assert float(loss) == pytest.approx((math.log(2.0) + math.log(3.0)) / 2, abs=1e-6)


def test_graded_labels_weigh_the_cross_entropy_by_y_and_p_t_by_y_over_its_sum():
  # s = (ln 2, 0, 0): p = (1/2, 1/4, 1/4); y = (2, 1, 0), as Rax's losses (rax 0.4.0, reduce_fn sum)
  # take them: softmax -(2 ln(1/2) + ln(1/4)) = 4 ln 2; Poly-1 adds 1 - (2/3 * 1/2 + 1/3 * 1/4) =
  # 7/12; pairwise: (1, 2) and (1, 3) ln 1.5 each, (2, 3) ln 2
  labels = np.array([[2.0, 1.0, 0.0]], np.float32)
  assert float(ranking_losses.softmax_cross_entropy(SCORES, labels, MASK)) == pytest.approx(
      4 * math.log(2.0), abs=1e-6)
  assert float(ranking_losses.poly1_softmax(SCORES, labels, MASK)) == pytest.approx(
      4 * math.log(2.0) + 7 / 12, abs=1e-6)
  assert float(ranking_losses.pairwise_logistic(SCORES, labels, MASK)) == pytest.approx(
      2 * math.log(1.5) + math.log(2.0), abs=1e-6)
