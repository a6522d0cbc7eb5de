"""The ranking losses RankT5 trains with (Zhuang et al., SIGIR 2023, "RankT5: Fine-Tuning T5 for
Text Ranking with Ranking Losses", section 4: the pairwise logistic loss, the listwise softmax
cross entropy and its Poly-1 variant), on lists of m documents per query.

Every loss takes `scores` (B, m) (the model's s_i), `labels` (B, m) (y_i >= 0; RankT5's lists: 1
for the relevant document, 0 for the sampled negatives) and `mask` (B, m) (False = padding, no
document), and returns the mean over the B lists of each list's loss. The forms are those of Rax
(google/rax `rax/_src/losses.py`), the library the RankT5 authors' T5X recipe (google/rax
examples/t5x) trains with, called as that recipe calls them (`reduce_fn=jnp.sum`, Rax's default
labels: the softmax's y_i as they are, Poly-1's P_t on y_i / sum_j y_j). Only the reduction
differs: the recipe sums the lists' losses and divides by a constant (`loss_normalizing_factor`),
here the mean over the lists that hold a relevant document (a constant factor for RankT5's lists,
each of which holds one; Adafactor's updates barely depend on it).

Worked by hand in each docstring with s = (ln 2, 0, 0), y = (1, 0, 0), and with graded labels
y = (2, 1, 0), where Rax's functions (rax 0.4.0, `reduce_fn=jnp.sum`) give the same numbers;
tests/test_ranking_losses.py checks them.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

RankingLoss = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def _list_mean(per_list: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
  """The mean over lists that hold a relevant document (a list without one has no loss)."""
  has_relevant = jnp.any((labels > 0) & mask, axis=-1).astype(jnp.float32)  # (B,)
  return jnp.sum(per_list * has_relevant) / jnp.maximum(jnp.sum(has_relevant), 1.0)


def _label_distribution(labels: jax.Array, mask: jax.Array) -> jax.Array:
  """y_i / sum_j y_j over the list's real documents (Rax's `normalize_probabilities`)."""
  labels = jnp.where(mask, labels, 0.0)
  return labels / jnp.maximum(jnp.sum(labels, axis=-1, keepdims=True), 1e-12)


def _masked_log_softmax(scores: jax.Array, mask: jax.Array) -> jax.Array:
  return jax.nn.log_softmax(jnp.where(mask, scores, -jnp.inf), axis=-1)


def _cross_entropy(labels: jax.Array, log_p: jax.Array, mask: jax.Array) -> jax.Array:
  """- sum_i y_i log p_i over each list's real documents (B,)."""
  return -jnp.sum(jnp.where(mask, labels, 0.0) * log_p, axis=-1)


def softmax_cross_entropy(scores: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
  """The listwise softmax cross entropy (RankT5 section 4, "Softmax"):

      l(s, y) = - sum_i y_i * log( e^{s_i} / sum_j e^{s_j} )

  By hand: s = (ln 2, 0, 0), y = (1, 0, 0): e^s = (2, 1, 1), the relevant document's softmax is
  2 / 4 = 1/2, l = -ln(1/2) = ln 2 = 0.693147. With one relevant document per list this is the
  cross entropy of picking it out of the m. Graded, y = (2, 1, 0): -(2 ln(1/2) + ln(1/4)) =
  4 ln 2 = 2.772589."""
  scores, labels = scores.astype(jnp.float32), labels.astype(jnp.float32)
  log_p = jnp.where(mask, _masked_log_softmax(scores, mask), 0.0)  # 0 where padding (not -inf)
  return _list_mean(_cross_entropy(labels, log_p, mask), labels, mask)


def poly1_softmax(scores: jax.Array, labels: jax.Array, mask: jax.Array,
                  epsilon: float = 1.0) -> jax.Array:
  """Poly-1 (Leng et al., ICLR 2022, "PolyLoss", (2): the cross entropy plus epsilon (1 - P_t)),
  on the listwise softmax (RankT5 section 4, "Poly1"):

      l(s, y) = softmax_cross_entropy(s, y) + epsilon * (1 - P_t),
      P_t = sum_i y_i / (sum_j y_j) * p_i,  p_i = e^{s_i} / sum_j e^{s_j}

  `epsilon` 1.0 as Rax's `poly1_softmax_loss` defaults it (gin: POLY1_EPSILON).
  By hand: s = (ln 2, 0, 0), y = (1, 0, 0), epsilon 1: ln 2 + (1 - 1/2) = 1.193147. Graded,
  y = (2, 1, 0): 4 ln 2 + (1 - (2/3 * 1/2 + 1/3 * 1/4)) = 4 ln 2 + 7/12 = 3.355922."""
  scores, labels = scores.astype(jnp.float32), labels.astype(jnp.float32)
  log_p = jnp.where(mask, _masked_log_softmax(scores, mask), 0.0)
  p_t = jnp.sum(_label_distribution(labels, mask) * jnp.where(mask, jnp.exp(log_p), 0.0), axis=-1)
  return _list_mean(_cross_entropy(labels, log_p, mask) + epsilon * (1.0 - p_t), labels, mask)


def pairwise_logistic(scores: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
  """The pairwise logistic loss (RankT5 section 4, "Pairwise"; RankNet's):

      l(s, y) = sum_i sum_j 1[y_i > y_j] * log(1 + e^{-(s_i - s_j)})

  summed over the list's ordered pairs of real documents (Rax's form with the recipe's
  `reduce_fn=jnp.sum`; Rax's default would take their mean), then averaged over lists.
  By hand: s = (ln 2, 0, 0), y = (1, 0, 0): the pairs (1, 2) and (1, 3), each
  log(1 + e^{-ln 2}) = ln(3/2), l = 2 ln 1.5 = 0.810930. Graded, y = (2, 1, 0): also the pair
  (2, 3), log(1 + e^0) = ln 2: l = 2 ln 1.5 + ln 2 = 1.504077."""
  scores, labels = scores.astype(jnp.float32), labels.astype(jnp.float32)
  difference = scores[..., :, None] - scores[..., None, :]  # (B, m, m): s_i - s_j
  pairs = ((labels[..., :, None] > labels[..., None, :])
           & mask[..., :, None] & mask[..., None, :])  # (B, m, m)
  per_pair = jax.nn.softplus(-difference)  # log(1 + e^{-(s_i - s_j)}), stable
  per_list = jnp.sum(jnp.where(pairs, per_pair, 0.0), axis=(-2, -1))
  return _list_mean(per_list, labels, mask)
