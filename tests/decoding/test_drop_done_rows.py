"""A search's step runs only on the rows still decoding (`SequenceSearch(drop_done_rows=True)`,
`keras_transformer.decoding.loop.drop_done_rows`), and every row decodes exactly as
when the batch's done rows stay in the step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.constants import EOS_ID
from keras_transformer.decoding import SequenceSearch
from keras_transformer.decoding.loop import Rows
from keras_transformer.decoding.loop import decode
from keras_transformer.decoding.strategies import GreedySearch
from keras_transformer.models import build_transformer

VOCAB = 16


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(11)
    return build_transformer("tiny", source_vocab_size=VOCAB, target_vocab_size=VOCAB)


def _sources(lengths, width=10):
    rng = np.random.default_rng(7)
    tokens = np.zeros((len(lengths), width), "int32")
    for row, length in enumerate(lengths):
        tokens[row, :length] = rng.integers(4, VOCAB, size=length)
    return tokens


def _counting_rows(model, monkeypatch):
    """A variable that each step of `model`'s searches adds its row count to."""
    rows_run = tf.Variable(0, dtype=tf.int32)
    decode_token = model.decode_token

    def counted(tokens, *args, **kwargs):
        rows_run.assign_add(tf.shape(tokens)[0])
        return decode_token(tokens, *args, **kwargs)

    monkeypatch.setattr(model, "decode_token", counted)
    return rows_run


@pytest.mark.parametrize("method, options", [
    ("greedy", {}),
    ("beam_search", {"beam_width": 3, "coverage": 0.0}),
    ("beam_search", {"beam_width": 3, "coverage": 0.4}),  # the step's cross-attention too
], ids=["greedy", "beam", "beam with coverage"])
def test_dropping_done_rows_changes_no_row_and_runs_fewer(model, monkeypatch, method, options):
    # Sources of many lengths give rows of many limits, so rows end at many steps. The
    # batch is split in two searches (as exports split it), each dropping its own rows.
    lengths = [1, 9, 2, 8, 3, 7, 4, 6, 5, 9, 1, 2] * 3
    source = _sources(lengths)
    rows_run = _counting_rows(model, monkeypatch)
    results, counts = [], []
    for drop in (False, True):
        search = SequenceSearch(model, max_length=16, extra_length=2, parallel_searches=2,
                                row_groups=False, drop_done_rows=drop, **options)
        rows_run.assign(0)
        results.append(getattr(search, method)(source))
        counts.append(int(rows_run.numpy()))
    kept, dropped = results
    np.testing.assert_array_equal(dropped["tokens"], kept["tokens"])
    np.testing.assert_array_equal(dropped["lengths"], kept["lengths"])
    # Matmuls over fewer rows may round differently in the last place.
    np.testing.assert_allclose(dropped["scores"], kept["scores"], rtol=1e-5, atol=1e-5)
    assert counts[1] < 0.8 * counts[0]
    if method == "greedy":
        # A row runs until it produces EOS or reaches its limit, and no further.
        limits = np.minimum(np.array(lengths) + 2, 16)
        steps = np.minimum(np.asarray(kept["lengths"]) + 1, limits)
        assert counts[1] == steps.sum()


def test_a_single_sentence_runs_the_loop_without_the_dropping(model, monkeypatch):
    # The dropping loop asks the strategy which rows are done at every step; the plain
    # loop never does, and its step has fewer ops.
    asked = tf.Variable(0, dtype=tf.int32)
    rows_done = GreedySearch.rows_done

    def counted(self, state):
        with tf.control_dependencies([asked.assign_add(1)]):
            return tf.identity(rows_done(self, state))

    monkeypatch.setattr(GreedySearch, "rows_done", counted)
    search = SequenceSearch(model, max_length=8, parallel_searches=1)
    search.greedy(_sources([4]))
    assert int(asked.numpy()) == 0
    search.greedy(_sources([4, 2]))
    assert int(asked.numpy()) > 0


def test_the_loop_keeps_each_rows_cache_and_inputs_with_it():
    # Row r ends after r + 1 steps. Each step checks that the cache's first position
    # (its row's id, written at step 0) and the row inputs still name the same row:
    # a row that reads another's produces token 6 instead of 5.
    num_rows, vocab = 5, 8
    ends = tf.constant([3, 1, 4, 2, 5])  # out of order: rows drop from the middle

    def step(tokens, index, cache, inputs):
        ids = inputs["ids"]
        cache = tf.concat([cache, tf.cast(ids, tf.float32)[None, :, None]], axis=2)
        matches = tf.equal(tf.cast(cache[0, :, 0], tf.int32), ids)
        token = tf.where(index + 1 >= tf.gather(ends, ids), EOS_ID, tf.where(matches, 5, 6))
        return tf.one_hot(token, vocab) * 20.0, cache

    @tf.function
    def run():
        rows = Rows(start_tokens=tf.fill([num_rows], 2), limits=tf.fill([num_rows], 9), length=9)
        cache = tf.zeros([1, num_rows, 0])
        return decode(step, GreedySearch(), rows, cache,
                      cache_shape=lambda tensor: tf.TensorShape([1, None, None]),
                      row_inputs={"ids": tf.range(num_rows)})

    result = run()
    expected_lengths = ends.numpy() - 1
    np.testing.assert_array_equal(result["lengths"], expected_lengths)
    for row, length in enumerate(expected_lengths):
        assert result["tokens"].numpy()[row, :length].tolist() == [5] * length
