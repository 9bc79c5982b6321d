"""`graph_function`: the package's graph functions trace without AutoGraph."""

import pytest
import tensorflow as tf

from keras_transformer.ops.graph import graph_function


def _python_branch(x):
    if x > 0:  # a Python `if` on a tensor: only AutoGraph makes it a graph branch
        return x
    return -x


def test_graph_function_traces_without_autograph():
    assert float(tf.function(_python_branch)(tf.constant(-2.0))) == 2.0
    with pytest.raises(TypeError, match="tf.Tensor"):
        graph_function(_python_branch)(tf.constant(-2.0))


def test_graph_function_keeps_tf_functions_options():
    doubled = graph_function(lambda x: 2 * x, input_signature=[tf.TensorSpec([None], tf.int32)])
    assert doubled(tf.constant([1, 2])).numpy().tolist() == [2, 4]
    with pytest.raises((TypeError, ValueError)):
        doubled(tf.constant([1.0]))  # outside the signature
