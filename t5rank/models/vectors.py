"""Unit vectors, as every model that compares by cosine computes them (TK's cosine matrix, the dual
encoder's encoders, T5's mean-pooled encoder)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

NORM_FLOOR = 1e-12  # a vector shorter than this (an empty text's zero) stays zero when normalized


def unit_vectors(x: jax.Array) -> jax.Array:
  """`x` scaled to length 1 along the last axis; a zero vector stays zero, with a finite gradient
  (I / NORM_FLOOR; a text with no known word has its embeddings masked before, and gets none). The
  floor goes under the square root: jnp.linalg.norm's gradient at a zero vector is 0/0, NaN, which
  a floor applied after it does not stop (one all-unknown text in a batch of XPI's pairs made
  every parameter NaN)."""
  return x / jnp.sqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), NORM_FLOOR ** 2))
