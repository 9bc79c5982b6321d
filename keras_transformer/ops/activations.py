"""Activations as the one-token decoding step runs them.

Shape notation: (B, F), the feed-forward layer's hidden rows of one step.

SiLU, x·σ(x), is what `keras.activations.silu` computes; TensorFlow's oneDNN
graph pass fuses that into one `_MklSwish` kernel, which on a step's few rows
costs as much as the layer's whole matmul and several times the four ops below
(`python -m bench kernels` times both). The step therefore writes σ through
tanh, σ(x) = (1 + tanh(x/2)) / 2, which no pass fuses and which agrees with
x·σ(x) to float rounding. The full pass (training, the encoder) keeps Keras's
activation, whose gradient is fused.
"""

import keras
import tensorflow as tf


def silu_through_tanh(x):
    """x·σ(x) computed as x·(1 + tanh(x/2))/2 (any float dtype, any shape)."""
    half = tf.constant(0.5, x.dtype)
    return x * (half + half * tf.tanh(half * x))


def step_activation(activation):
    """The function the decoding step applies for a feed-forward `activation`.

    Args:
        activation: a Keras activation function (`keras.activations.get(...)`).

    Returns:
        `silu_through_tanh` for SiLU (alias swish); `activation` itself otherwise.
    """
    if activation is keras.activations.silu:
        return silu_through_tanh
    return activation
