"""`bench step`'s stock design really runs Keras' norm and arg-max, and ours does not."""

import collections

import tensorflow as tf

from bench import step
from keras_transformer.layers.normalization import LayerNormalization
from keras_transformer.training.losses import MaskedTokenAccuracy


def _norm_gradient_ops():
    norm = LayerNormalization()
    norm.build((2, 3, 8))

    @tf.function
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(norm(x))
        return tape.gradient(loss, x)

    graph = gradient.get_concrete_function(tf.TensorSpec((2, 3, 8), tf.float32)).graph
    return collections.Counter(op.type for op in graph.get_operations())


def _accuracy_logit_readers():
    metric = MaskedTokenAccuracy()
    update = tf.function(metric.update_state).get_concrete_function(
        tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None, 11), tf.float32))
    logits = update.graph.inputs[1]
    return sorted(op.type for op in update.graph.get_operations()
                  if any(tensor is logits for tensor in op.inputs))


def test_the_stock_design_swaps_in_keras_norm_and_arg_max_and_only_while_patched():
    with step._stock_norm(), step._stock_arg_max():
        assert _norm_gradient_ops()["RsqrtGrad"] == 1  # TensorFlow differentiates the formula
        assert _accuracy_logit_readers() != ["ArgMax"]  # keras.ops.argmax's extra passes
    assert _norm_gradient_ops()["RsqrtGrad"] == 0
    assert _accuracy_logit_readers() == ["ArgMax"]
