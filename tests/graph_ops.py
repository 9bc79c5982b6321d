"""Which ops a traced graph runs: the helpers of the tests that check what a layer's
gradient or a metric compiles to (tests/layers, tests/training, tests/bench)."""

import collections

import tensorflow as tf


def gradient_op_types(layer, shape):
    """Op types, counted, of one graph that runs a built `layer` on float32 inputs of
    `shape` and differentiates a loss of its outputs by the inputs and its weights."""

    @tf.function
    def gradients(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = tf.reduce_sum(tf.square(layer(inputs)))
        return tape.gradient(loss, [inputs] + layer.trainable_weights)

    graph = gradients.get_concrete_function(tf.TensorSpec(shape, tf.float32)).graph
    return collections.Counter(op.type for op in graph.get_operations())


def logit_readers(metric, vocab_size=11):
    """Types of the ops that read the (B, T, V) logits in `metric.update_state`'s graph."""
    update = tf.function(metric.update_state).get_concrete_function(
        tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None, vocab_size), tf.float32))
    logits = update.graph.inputs[1]
    return sorted(op.type for op in update.graph.get_operations()
                  if any(tensor is logits for tensor in op.inputs))
