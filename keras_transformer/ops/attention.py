"""Scaled dot-product attention: the formula, in one function.

Shape notation: B batch, T queries, S keys, H heads, D head size.
"""

import math

import tensorflow as tf
from keras import ops

from keras_transformer.ops.choices import ATTENTION_ACTIVATIONS  # noqa: F401 (re-exported)

# Masked logits get this large finite negative number: -inf would give NaN where a
# whole row is masked (-inf - -inf), and a finite value keeps float32 softmax exact.
MASK_VALUE = -1e9


def attention_weights(scores, mask=None,
                      attention_activation="softmax", fused_softmax=True):
    """Normalises attention scores into weights: the masking and softmax (or ReLU) step.

    Shared by the full pass (`scaled_dot_product_attention`) and the one-token
    decoding step (`attend_one_query`).

    Args:
        scores: (..., T, S) scores Q Kᵀ / √D, any float dtype.
        mask: optional booleans broadcastable to `scores`, True where attention is
            allowed.
        attention_activation: "softmax" (the paper) or "relu": ReLU(scores) / n, where masked
            positions contribute zero and n counts the keys the query may see
            (ReLU attention, Wortsman et al., 2023).
        fused_softmax: run softmax as the one `Softmax` kernel; False spells it as
            `exp(log_softmax)`, the same weights up to rounding, for the decoding
            step's tiny rows, which the fused kernel serves slowly through oneDNN
            (`attend_one_query`).

    Returns:
        (..., T, S) float32 weights.
    """
    # Normalise in float32 whatever the compute dtype: bf16 softmax loses mass.
    scores = ops.cast(scores, "float32")
    if attention_activation == "softmax":
        if mask is not None:
            scores = ops.where(mask, scores, MASK_VALUE)
        if not fused_softmax:
            return ops.exp(ops.log_softmax(scores, axis=-1))
        return ops.softmax(scores, axis=-1)
    if attention_activation == "relu":
        weights = ops.relu(scores)
        if mask is None:
            return weights / ops.cast(ops.shape(scores)[-1], "float32")
        # Count only the keys each query may see, so that padding and the unused
        # tail of a decoding cache change nothing.
        weights = ops.where(mask, weights, 0.0)
        visible = ops.sum(ops.cast(mask, "float32"), axis=-1, keepdims=True)
        return weights / ops.maximum(visible, 1.0)
    raise ValueError(
        f"`attention_activation` must be one of {ATTENTION_ACTIVATIONS}; received "
        f"attention_activation={attention_activation!r}."
    )


def scaled_dot_product_attention(
    query,
    key,
    value,
    mask=None,
    attention_activation="softmax",
    dropout_layer=None,
    training=None,
):
    """Computes softmax(Q Kᵀ / √D) V for every head.

    Args:
        query: (B, H, T, D).
        key: (B, H, S, D).
        value: (B, H, S, D).
        mask: optional (B or 1, T, S) booleans, True where attention is allowed.
        attention_activation: "softmax" (the paper) or "relu": ReLU(scores) / n, where masked
            positions contribute zero and n counts the keys the query may see
            (ReLU attention, Wortsman et al., 2023).
        dropout_layer: optional `keras.layers.Dropout` applied to the weights.
        training: passed to the dropout layer.

    Returns:
        A tuple `(outputs, weights)`: outputs (B, H, T, D) in the query's dtype,
        weights (B, H, T, S) in the query's dtype.
    """
    head_size = query.shape[-1]
    # Scaling the queries before the product costs T·D multiplies instead of T·S.
    query = ops.multiply(query, ops.cast(1.0 / math.sqrt(head_size), query.dtype))
    scores = ops.einsum("bhtd,bhsd->bhts", query, key)
    if mask is not None:
        mask = ops.expand_dims(ops.cast(mask, "bool"), axis=1)  # (B, 1, T, S)
    weights = attention_weights(scores, mask, attention_activation)
    weights = ops.cast(weights, value.dtype)
    attended = weights
    if dropout_layer is not None:
        attended = dropout_layer(weights, training=training)
    outputs = ops.einsum("bhts,bhsd->bhtd", attended, value)
    return outputs, weights


def attend_one_query(
    query, keys, values, mask=None, attention_activation="softmax", return_weights=False
):
    """softmax(q Kᵀ) V for one query per row and head: the decoding step's attention.

    With one query the two products are matrix-vector products, tiny ones (a row of
    D = 64 against L ≤ a few dozen keys), which cost more in dispatch than in
    arithmetic. `BatchMatMulV2` (what `tf.matmul` and `einsum` run) and `Softmax` go
    through oneDNN on CPUs with AVX-512 VNNI (TensorFlow's default there), which
    hands even a row of 64 numbers to its thread pool; `BatchMatMulV3`, the same
    product with its output type named, runs TensorFlow's own Eigen kernel, and the
    softmax is spelled `exp(log_softmax)`. `python -m bench kernels` compares the
    spellings (docs/experiments.md, "Speed"): faster than elementwise products
    summed over D and L and than oneDNN's batched matmuls, at batch 1 and 32 alike.

    Args:
        query: (B, H, 1, D), already scaled by 1/√D.
        keys: (B, H, L, D).
        values: (B, H, L, D).
        mask: optional booleans broadcastable to (B, H, 1, L), True where a key is
            visible.
        attention_activation: as in `attention_weights`.
        return_weights: also return the (B, H, 1, L) float32 weights.

    Returns:
        (B, H, 1, D) float32 outputs; with `return_weights`, `(outputs, weights)`.
    """
    # In float32 whatever the compute dtype, as a matmul accumulates (the casts are
    # no ops for a float32 model).
    query, keys, values = (tf.cast(x, tf.float32) for x in (query, keys, values))
    scores = tf.raw_ops.BatchMatMulV3(x=query, y=keys, Tout=tf.float32, adj_y=True)  # (B, H, 1, L)
    weights = attention_weights(scores, mask, attention_activation, fused_softmax=False)
    outputs = tf.raw_ops.BatchMatMulV3(x=weights, y=values, Tout=tf.float32)
    return (outputs, weights) if return_weights else outputs
