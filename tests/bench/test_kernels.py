"""The kernels `python -m bench kernels` compares compute the same numbers, so that
only their speed differs."""

import numpy as np

from bench import kernels
from keras_transformer.ops.attention import scaled_dot_product_attention


def test_attention_candidates_equal_the_full_formula_for_one_query():
    rng = np.random.default_rng(0)
    batch, heads, length, depth = 3, 2, 7, 8
    query = rng.normal(size=(batch, heads, 1, depth)).astype("float32")
    keys = rng.normal(size=(batch, heads, length, depth)).astype("float32")
    values = rng.normal(size=(batch, heads, length, depth)).astype("float32")
    visible = np.arange(length)[None, :] < np.array([7, 4, 1])[:, None]  # (B, L)
    expected, _ = scaled_dot_product_attention(query, keys, values, mask=visible[:, None, :])
    scaled = query / np.sqrt(depth)  # a step's queries come scaled
    for kernel in (kernels.attend_as_the_step_does, kernels.attend_by_products,
                   kernels.attend_by_batched_matmuls, kernels.attend_with_spelled_out_softmax):
        outputs = kernel(scaled, keys, values, visible[:, None, None, :])
        np.testing.assert_allclose(np.asarray(outputs), np.asarray(expected), atol=1e-5,
                                   err_msg=kernel.__name__)


def test_the_matmul_floor_runs_the_matmuls_of_a_step():
    import collections

    import tensorflow as tf

    from bench.decoding import step_op_counts
    from keras_transformer.decoding import SequenceSearch
    from keras_transformer.models import build_transformer

    model = build_transformer("tiny", source_vocab_size=40, target_vocab_size=30,
                              num_decoder_layers=2)
    stack = model.decoder_stack
    step = kernels.matmul_floor_step(stack)
    rows = tf.zeros((3, stack.d_model))
    graph = tf.function(step).get_concrete_function(rows).graph
    floor_shapes = collections.Counter(
        tuple(operation.inputs[1].shape) for operation in graph.get_operations()
        if operation.type == "MatMul"
    )
    # As many matmuls as the search's step runs, the output projection among them.
    search = SequenceSearch(model, max_length=4)
    step_matmuls = step_op_counts(search, "greedy")["MatMul"]
    assert sum(floor_shapes.values()) == step_matmuls
    width, vocabulary = stack.d_model, 30
    assert floor_shapes[(width, vocabulary)] == 1  # the output projection
    assert step(rows).shape == (3, width)
