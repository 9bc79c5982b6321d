"""A large batch split in parts that run at once (`SequenceSearch(parallel_searches=P)`),
as row groups of one search or as searches, decodes exactly as one search of the whole
batch."""

import keras
import numpy as np
import pytest

from keras_transformer.decoding import SequenceSearch
from keras_transformer.decoding.search import MIN_GROUP_ROWS
from keras_transformer.decoding.search import group_sizes
from keras_transformer.decoding.search import row_groups_by_default
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


def test_a_batch_is_split_only_when_every_group_gets_enough_rows():
    def rule(batch_size, rows_per_sentence, groups=2):
        split, sizes = group_sizes(batch_size, rows_per_sentence, groups)
        return bool(split), np.asarray(sizes).tolist()

    assert MIN_GROUP_ROWS == 16  # the cases below are written for it
    assert rule(32, 1) == (True, [16, 16])
    assert rule(31, 1) == (False, [16, 15])
    assert rule(33, 1) == (True, [17, 16])
    assert rule(8, 4) == (True, [4, 4])  # beam 4: 32 hypotheses
    assert rule(7, 4) == (False, [4, 3])
    assert rule(100, 1, groups=3) == (True, [34, 33, 33])
    assert rule(1, 1) == (False, [1, 0])


@pytest.mark.parametrize("row_groups, growing_cache", [(True, True), (True, False), (False, True)],
                         ids=["row groups", "row groups, preallocated", "searches"])
@pytest.mark.parametrize("method, beam_width, batch_size", [
    ("greedy", 1, 2 * MIN_GROUP_ROWS + 1),  # groups of 17 and 16 sentences
    ("beam_search", 3, 11),  # 33 hypotheses: groups of 6 and 5 sentences
    ("greedy", 1, 3),  # too few rows: one group
])
def test_parts_decode_as_one_search_of_the_whole_batch(model, method, beam_width, batch_size,
                                                       row_groups, growing_cache):
    # Short sources first and long ones last, so the groups' rows run for different
    # numbers of steps; beam search moves hypotheses within each group's sentences.
    lengths = np.sort(np.random.default_rng(batch_size).integers(1, 10, size=batch_size))
    source = _sources(lengths, width=12)
    searches = [
        SequenceSearch(model, max_length=24, extra_length=4, beam_width=beam_width,
                       growing_cache=growing_cache, parallel_searches=parts,
                       row_groups=row_groups)
        for parts in (1, 2)
    ]
    whole, grouped = (getattr(search, method)(source) for search in searches)
    np.testing.assert_array_equal(grouped["tokens"], whole["tokens"])
    np.testing.assert_array_equal(grouped["lengths"], whole["lengths"])
    # Matmuls over fewer rows may round differently in the last place.
    np.testing.assert_allclose(grouped["scores"], whole["scores"], rtol=1e-5, atol=1e-5)
    group_lengths = [np.max(np.asarray(whole["lengths"])[part]) for part in
                     (slice(0, (batch_size + 1) // 2), slice((batch_size + 1) // 2, None))]
    assert group_lengths[0] < group_lengths[1]


@pytest.mark.parametrize("method", ["greedy", "beam_search"])
def test_the_row_groups_step_runs_the_blocks_per_group_and_one_output_projection(model, method):
    # The groups' blocks are ops the executor runs at once; the output projection and
    # the scores over the vocabulary, which TensorFlow spreads over its threads, run
    # once on the joined rows.
    from bench.decoding import loop_op_counts

    whole_step, = loop_op_counts(SequenceSearch(model, max_length=8, parallel_searches=1,
                                                drop_done_rows=False), method)
    bodies = loop_op_counts(SequenceSearch(model, max_length=8, parallel_searches=2,
                                           row_groups=True, drop_done_rows=False), method)
    assert len(bodies) == 2  # the whole batch's loop, for small batches, and the groups'
    assert whole_step in bodies
    grouped_step, = [body for body in bodies if body != whole_step]
    block_matmuls = whole_step["MatMul"] - 1  # all but the output projection
    assert grouped_step["MatMul"] == 2 * block_matmuls + 1
    assert grouped_step["LogSoftmax"] - whole_step["LogSoftmax"] == whole_step["LogSoftmax"] - 1


@pytest.mark.parametrize("method", ["greedy", "beam_search"])
def test_searches_are_independent_calls_of_the_whole_batchs_loop(model, method):
    # Two calls in the split branch plus the whole batch's: one loop, called three times.
    search = SequenceSearch(model, max_length=8, parallel_searches=2, row_groups=False,
                            drop_done_rows=False)
    graph_def = search.concrete_function(method).graph.as_graph_def()
    library = {function.signature.name: function for function in graph_def.library.function}
    loops = {name for name, function in library.items()
             if any(node.op in ("While", "StatelessWhile") for node in function.node_def)}
    nodes = list(graph_def.node) + [node for f in library.values() for node in f.node_def]
    calls = [node.attr["f"].func.name for node in nodes
             if node.op in ("PartitionedCall", "StatefulPartitionedCall")]
    assert len(loops) == 1
    assert sum(name in loops for name in calls) == 3


def test_row_groups_unless_the_process_runs_one_thread_per_op(model, monkeypatch):
    import tensorflow as tf

    # Under TensorFlow's threads the output projection and the vocabulary's scores
    # spread over them once on all rows; with one thread per op searches share nothing.
    assert row_groups_by_default()
    assert SequenceSearch(model, max_length=8).row_groups
    monkeypatch.setattr(tf.config.threading, "get_intra_op_parallelism_threads", lambda: 1)
    assert not row_groups_by_default()
    assert not SequenceSearch(model, max_length=8).row_groups
    assert SequenceSearch(model, max_length=8, row_groups=True).row_groups


def test_parts_need_graph_mode_and_a_positive_count(model):
    assert SequenceSearch(model, max_length=8).parallel_searches == 2
    assert SequenceSearch(model, max_length=8, jit_compile=True).parallel_searches == 1
    with pytest.raises(ValueError, match="parallel_searches"):
        SequenceSearch(model, max_length=8, jit_compile=True, parallel_searches=2)
    with pytest.raises(ValueError, match="parallel_searches"):
        SequenceSearch(model, max_length=8, parallel_searches=0)
