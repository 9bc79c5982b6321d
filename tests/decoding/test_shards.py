"""A large batch searched as shards at once (`SequenceSearch(parallel_searches=P)`)
decodes exactly as one search of the whole batch."""

import collections

import keras
import numpy as np
import pytest

from keras_transformer.decoding import SequenceSearch
from keras_transformer.decoding.search import MIN_SHARD_ROWS
from keras_transformer.decoding.search import shard_sizes
from keras_transformer.models import build_transformer

VOCAB = 16


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(11)
    return build_transformer("tiny", source_vocab_size=VOCAB, target_vocab_size=VOCAB)


def _sources(lengths, width):
    rng = np.random.default_rng(5)
    tokens = np.zeros((len(lengths), width), "int32")
    for row, length in enumerate(lengths):
        tokens[row, :length] = rng.integers(4, VOCAB, size=length)
    return tokens


def test_a_batch_is_split_only_when_every_shard_gets_enough_rows():
    def rule(batch_size, rows_per_sentence, shards=2):
        split, sizes = shard_sizes(batch_size, rows_per_sentence, shards)
        return bool(split), np.asarray(sizes).tolist()

    assert MIN_SHARD_ROWS == 16  # the cases below are written for it
    assert rule(32, 1) == (True, [16, 16])
    assert rule(31, 1) == (False, [16, 15])
    assert rule(33, 1) == (True, [17, 16])
    assert rule(8, 4) == (True, [4, 4])  # beam 4: 32 hypotheses
    assert rule(7, 4) == (False, [4, 3])
    assert rule(100, 1, shards=3) == (True, [34, 33, 33])
    assert rule(1, 1) == (False, [1, 0])


@pytest.mark.parametrize("method, beam_width, batch_size", [
    ("greedy", 1, 2 * MIN_SHARD_ROWS + 1),  # shards of 17 and 16 sentences
    ("beam_search", 3, 11),  # 33 hypotheses: shards of 6 and 5 sentences
    ("greedy", 1, 3),  # too few rows: one search
])
def test_shards_decode_as_one_search_of_the_whole_batch(model, method, beam_width, batch_size):
    # Short sources first and long ones last, so the shards' outputs differ in length
    # and the joined tokens must be padded.
    lengths = np.sort(np.random.default_rng(batch_size).integers(1, 10, size=batch_size))
    source = _sources(lengths, width=12)
    searches = [
        SequenceSearch(model, max_length=24, extra_length=4, beam_width=beam_width,
                       parallel_searches=shards)
        for shards in (1, 2)
    ]
    whole, sharded = (getattr(search, method)(source) for search in searches)
    np.testing.assert_array_equal(sharded["tokens"], whole["tokens"])
    np.testing.assert_array_equal(sharded["lengths"], whole["lengths"])
    # Matmuls over fewer rows may round differently in the last place.
    np.testing.assert_allclose(sharded["scores"], whole["scores"], rtol=1e-5, atol=1e-5)
    shard_lengths = [np.max(np.asarray(whole["lengths"])[part]) for part in
                     (slice(0, (batch_size + 1) // 2), slice((batch_size + 1) // 2, None))]
    assert shard_lengths[0] < shard_lengths[1]  # when split, the first shard's are padded


def _loop_calls(search, method):
    """How many times the traced search calls the function holding the `While` loop."""
    graph_def = search.concrete_function(method).graph.as_graph_def()
    library = {function.signature.name: function for function in graph_def.library.function}
    loops = {name for name, function in library.items()
             if any(node.op in ("While", "StatelessWhile") for node in function.node_def)}
    nodes = list(graph_def.node) + [node for f in library.values() for node in f.node_def]
    calls = collections.Counter(
        node.attr["f"].func.name for node in nodes
        if node.op in ("PartitionedCall", "StatefulPartitionedCall")
    )
    return sum(calls[name] for name in loops)


@pytest.mark.parametrize("method", ["greedy", "beam_search"])
def test_the_shards_are_independent_calls_of_one_search_loop(model, method):
    # P calls in the sharded branch plus the whole-batch branch; one search without.
    assert _loop_calls(SequenceSearch(model, max_length=8, parallel_searches=2), method) == 3
    assert _loop_calls(SequenceSearch(model, max_length=8, parallel_searches=1), method) == 1


def test_shards_need_graph_mode_and_a_positive_count(model):
    assert SequenceSearch(model, max_length=8).parallel_searches == 2
    assert SequenceSearch(model, max_length=8, jit_compile=True).parallel_searches == 1
    with pytest.raises(ValueError, match="parallel_searches"):
        SequenceSearch(model, max_length=8, jit_compile=True, parallel_searches=2)
    with pytest.raises(ValueError, match="parallel_searches"):
        SequenceSearch(model, max_length=8, parallel_searches=0)
