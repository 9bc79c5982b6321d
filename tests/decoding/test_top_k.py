"""Beam search's top-k in two small top-k over chunks of the candidates
(`top_k_by_chunks`) gives the plain top-k's candidates."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import SequenceSearch
from keras_transformer.decoding import strategies
from keras_transformer.decoding.strategies import chunk_size
from keras_transformer.decoding.strategies import top_k_by_chunks
from keras_transformer.models import build_transformer


@pytest.mark.parametrize("vocab_size", [64, 100, 5000, 8000, 32000])
def test_the_chunk_divides_the_vocabulary_and_leaves_at_least_8_chunks(vocab_size):
    chunk = chunk_size(vocab_size)
    assert vocab_size % chunk == 0 and 8 <= chunk <= vocab_size // 8


@pytest.mark.parametrize("vocab_size", [None, 16, 63, 4999])  # 4999 is prime
def test_a_vocabulary_without_a_fitting_chunk_keeps_the_plain_top_k(vocab_size):
    assert chunk_size(vocab_size) is None


def _layouts(rows, size, k, chunk, rng):
    yield "random", rng.standard_normal((rows, size))
    crowded = rng.standard_normal((rows, size))
    crowded[:, chunk : chunk + k] = 10 + rng.random((rows, k))  # every best one in one chunk
    yield "one chunk", crowded
    spread = rng.standard_normal((rows, size))
    spread[:, ::chunk][:, :k] = 10 + rng.random((rows, k))  # each in a chunk of its own
    yield "spread", spread
    yield "many equal", np.round(rng.standard_normal((rows, size)), 1)


@pytest.mark.parametrize("size, k, chunk", [(4 * 5000, 8, 50), (2 * 100, 4, 10), (640, 8, 8)])
def test_two_small_top_k_give_the_plain_top_k(size, k, chunk):
    rng = np.random.default_rng(size)
    for name, values in _layouts(5, size, k, chunk, rng):
        values = tf.constant(values, tf.float32)
        expected_values, expected_indices = tf.math.top_k(values, k=k)
        top_values, indices = top_k_by_chunks(values, k, chunk)
        np.testing.assert_array_equal(top_values, expected_values, err_msg=name)
        # Each index points at its value (equal values may come in another order).
        np.testing.assert_array_equal(tf.gather(values, indices, batch_dims=1), top_values,
                                      err_msg=name)
        if name != "many equal":
            np.testing.assert_array_equal(indices, expected_indices, err_msg=name)


def test_beam_search_with_chunks_equals_beam_search_with_the_plain_top_k(monkeypatch):
    keras.utils.set_random_seed(3)
    vocab_size = 256
    model = build_transformer("tiny", source_vocab_size=vocab_size, target_vocab_size=vocab_size)
    source = np.random.default_rng(3).integers(4, vocab_size, size=(5, 7)).astype("int32")
    source[1, 4:] = 0
    chunked = SequenceSearch(model, max_length=10, beam_width=4).beam_search(source)
    assert chunk_size(vocab_size) is not None
    monkeypatch.setattr(strategies, "chunk_size", lambda vocab_size: None)
    plain = SequenceSearch(model, max_length=10, beam_width=4).beam_search(source)
    np.testing.assert_array_equal(chunked["tokens"], plain["tokens"])
    np.testing.assert_allclose(chunked["scores"], plain["scores"], rtol=1e-6)
