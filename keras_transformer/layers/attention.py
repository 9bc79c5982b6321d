"""Multi-head attention: projections, heads split and merged; the one-token decoding step.

Shape notation: B batch, T queries, S keys (context length), M model width
(d_model), H heads, D head size (M / H), L cache length.
"""

import math

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.layers.head_projection import HeadProjection
from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.layers.quantization import float_kernel
from keras_transformer.ops import checks
from keras_transformer.ops.attention import ATTENTION_ACTIVATIONS
from keras_transformer.ops.attention import attend_one_query
from keras_transformer.ops.attention import scaled_dot_product_attention
from keras_transformer.ops.masks import compute_attention_mask


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention, for self- and cross-attention.

    Projects queries from `query` and keys/values from `context` (or from `query`
    when no context is given) into H heads of size D, computes
    softmax(Q Kᵀ / √D) V per head (`keras_transformer.ops.attention`), merges the
    heads and projects back to M. Masks come from the one mask helper
    (`keras_transformer.ops.masks`).

    Args:
        num_heads: H, number of attention heads.
        key_dim: D, size of each head; defaults to M / H (M must then divide by H).
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        causal: if True, position i attends only to positions <= i.
        window: optional int w: position i attends only to |i - j| <= w (local
            attention). Meant for self-attention.
        attention_activation: the function that turns the scores Q Kᵀ / √D into
            weights: "softmax" (the paper) or "relu" (ReLU(scores) divided by the
            number of keys the query may see). An activation over the scores, not a
            layer normalization (those are the blocks' `norm_first` and
            `layer_norm_epsilon`).
        kernel_initializer: initializer of the projection kernels; each
            projection gets its own copy (`clone_initializer`), so they start apart.
        bias_initializer: initializer of the projection biases.
        **kwargs: `keras.layers.Layer` arguments (name, dtype, ...).

    Call arguments:
        query: (B, T, M) floats.
        context: optional (B, S, Mc) floats to attend to (cross-attention).
        query_padding_mask: optional (B, T) booleans, True for real tokens. In
            self-attention it masks the keys; padded queries are left unmasked (their
            outputs are never read, and masking whole rows only costs time).
        context_padding_mask: optional (B, S) booleans for the context.
        attention_mask: optional (B, T, S) booleans ANDed with the others.
        return_attention_scores: also return the (B, H, T, S) weights.
        training: whether dropout is active.

    Returns:
        outputs (B, T, M); then the attention weights if asked.

    Decoding runs one token per step through `project_token` and `attend_token`
    against weights read once (`decoding_weights`) and keys and values kept by the
    search (`keras_transformer.models.incremental`).

    Example:
        >>> layer = MultiHeadSelfAttention(num_heads=4, causal=True)
        >>> x = keras.random.normal((2, 7, 64))
        >>> layer(x).shape
        (2, 7, 64)
    """

    def __init__(
        self,
        num_heads,
        key_dim=None,
        dropout=0.0,
        use_bias=True,
        causal=False,
        window=None,
        attention_activation="softmax",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = checks.check_positive_int("num_heads", num_heads)
        self.key_dim = checks.check_optional_positive_int("key_dim", key_dim)
        self.dropout = checks.check_rate("dropout", dropout)
        self.use_bias = bool(use_bias)
        self.causal = bool(causal)
        self.window = checks.check_optional_positive_int("window", window)
        self.attention_activation = checks.check_choice(
            "attention_activation", attention_activation, ATTENTION_ACTIVATIONS
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, query_shape, context_shape=None):
        checks.check_rank("query", query_shape, 3)
        model_dim = query_shape[-1]
        if self.key_dim is None:
            checks.check_divisible("d_model", model_dim, "num_heads", self.num_heads)
            self.head_dim = model_dim // self.num_heads
        else:
            self.head_dim = self.key_dim
        if context_shape is not None:
            checks.check_rank("context", context_shape, 3)
        context_dim = model_dim if context_shape is None else context_shape[-1]
        # Built with a context: keys and values come from it (fixed during decoding).
        self.is_cross_attention = context_shape is not None
        heads = {"num_heads": self.num_heads, "head_dim": self.head_dim}

        def projection(name, **sizes):
            # Each projection gets its own initializer: one shared object would give
            # the query, key and value kernels equal starting values.
            return HeadProjection(
                use_bias=self.use_bias,
                kernel_initializer=clone_initializer(self.kernel_initializer, name),
                bias_initializer=clone_initializer(self.bias_initializer, name),
                dtype=self.dtype_policy,
                name=name,
                **sizes,
            )

        # Same weight shapes as keras.layers.MultiHeadAttention: (M, H, D) in and
        # (H, D, M) out. `_split_heads` then puts heads first, so a decoding cache
        # kept as (B, 2, H, L, D) is never transposed by the attention products.
        self.query_dense = projection("query", direction="split", **heads)
        self.query_dense.build(query_shape)
        kv_input_shape = (query_shape[0], None, context_dim)
        self.key_dense = projection("key", direction="split", **heads)
        self.key_dense.build(kv_input_shape)
        self.value_dense = projection("value", direction="split", **heads)
        self.value_dense.build(kv_input_shape)
        self.output_dense = projection("attention_output", direction="merge", output_dim=model_dim)
        self.output_dense.build((query_shape[0], None, self.num_heads, self.head_dim))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    @staticmethod
    def _split_heads(projected):
        """(B, T, H, D) → (B, H, T, D)."""
        return ops.transpose(projected, (0, 2, 1, 3))

    @staticmethod
    def _merge_heads(attended):
        """(B, H, T, D) → (B, T, H, D), the layout the output projection reads."""
        return ops.transpose(attended, (0, 2, 1, 3))

    def compute_key_value(self, context):
        """Projects `context` (B, S, Mc) to a read-only cache (B, 2, H, S, D).

        One matmul with the key and value kernels side by side (`fused_kernel`).
        """
        kernel, bias = self.fused_kernel(("key", "value"))
        shape = ops.shape(context)
        projected = ops.matmul(ops.reshape(context, (-1, shape[-1])), kernel)
        if bias is not None:
            projected = projected + bias
        projected = ops.reshape(
            projected, (shape[0], shape[1], 2, self.num_heads, self.head_dim)
        )
        return ops.transpose(projected, (0, 2, 3, 1, 4))

    # Decoding one token per step ------------------------------------------------
    #
    # A search runs the decoder on (B, M) rows, one token each, thousands of times:
    # in graph mode (stock TF Serving) every op costs overhead, so the step keeps
    # 2-D matmuls against weights prepared once per search and heads laid out so
    # that no transpose is needed (see `Seq2SeqTransformer.start_decoding`).

    def fused_kernel(self, names):
        """The named projections' kernels side by side, as one 2-D matmul kernel.

        Built from the separate `query`/`key`/`value` variables (so checkpoints keep
        their layout) each time it is called: a search calls it once, outside its loop.
        The query part is scaled by 1/√D, which the attention formula applies to
        queries anyway.

        Args:
            names: projections among "query", "key", "value", in the wanted order.

        Returns:
            `(kernel, bias)`: (Mq, n·H·D) and (n·H·D,) (None without biases), in the
            compute dtype.
        """
        dense = {"query": self.query_dense, "key": self.key_dense, "value": self.value_dense}
        scale = 1.0 / math.sqrt(self.head_dim)
        kernels, biases = [], []
        for name in names:
            projection = dense[name]
            kernel = ops.reshape(float_kernel(projection), (projection.kernel.shape[0], -1))
            bias = None if projection.bias is None else ops.reshape(projection.bias, (-1,))
            if name == "query":  # only the queries are scaled: no multiply by 1 of the rest
                kernel = kernel * scale
                bias = None if bias is None else bias * scale
            kernels.append(kernel)
            if bias is not None:
                biases.append(bias)
        kernel = ops.cast(ops.concatenate(kernels, axis=1), self.compute_dtype)
        bias = ops.cast(ops.concatenate(biases, axis=0), self.compute_dtype) if biases else None
        return kernel, bias

    def decoding_weights(self):
        """Weights of `decode_token`, as tensors read once per search.

        Returns:
            dict: "input_kernel"/"input_bias", the fused query, key and value
            projection (self-attention) or the query projection alone
            (cross-attention, whose keys and values come from `compute_key_value`);
            "output_kernel" (H·D, M) and "output_bias" (M,) or None.
        """
        names = ("query",) if self.is_cross_attention else ("query", "key", "value")
        input_kernel, input_bias = self.fused_kernel(names)
        output = self.output_dense
        output_kernel = ops.reshape(float_kernel(output), (-1, output.kernel.shape[-1]))
        output_bias = None if output.bias is None else tf.identity(output.bias)
        cast = lambda x: None if x is None else ops.cast(x, self.compute_dtype)  # noqa: E731
        return {
            "input_kernel": input_kernel,
            "input_bias": input_bias,
            "output_kernel": cast(output_kernel),
            "output_bias": cast(output_bias),
        }

    def project_token(self, x, weights):
        """Projects (B, M) rows: queries (B, H, 1, D), and for self-attention the
        new keys and values, each (B, H, 1, D) (None for cross-attention)."""
        projected = tf.matmul(x, weights["input_kernel"])
        if weights["input_bias"] is not None:
            projected = tf.nn.bias_add(projected, weights["input_bias"])
        if self.is_cross_attention:
            return tf.reshape(projected, (-1, self.num_heads, 1, self.head_dim)), None
        projected = tf.reshape(projected, (-1, 3, self.num_heads, 1, self.head_dim))
        query, keys, values = tf.unstack(projected, axis=1)  # one op, three outputs
        return query, (keys, values)

    def attend_token(self, query, keys, values, mask, weights, return_weights=False):
        """Attention of one query per row over prepared keys and values.

        Args:
            query: (B, H, 1, D) from `project_token` (already scaled by 1/√D).
            keys: (B, H, L, D).
            values: (B, H, L, D).
            mask: booleans broadcastable to (B, H, 1, L), True where a key is
                visible (`cache_token_mask`, or the source padding mask as (B, 1, 1, S)).
            weights: from `decoding_weights`.
            return_weights: also return the attention weights, (B, H, 1, L) float32.

        Returns:
            (B, M) outputs; with `return_weights`, `(outputs, attention_weights)`.
        """
        attended, attention_weights = attend_one_query(
            query, keys, values, mask, self.attention_activation, return_weights=True
        )  # (B, H, 1, D), (B, H, 1, L)
        outputs = tf.matmul(
            tf.reshape(tf.cast(attended, self.compute_dtype), (-1, self.num_heads * self.head_dim)),
            weights["output_kernel"],
        )
        if weights["output_bias"] is not None:
            outputs = tf.nn.bias_add(outputs, weights["output_bias"])
        return (outputs, attention_weights) if return_weights else outputs

    def cache_token_mask(self, index, cache_length):
        """The keys a self-attention step at position `index` sees in a cache of
        `cache_length` positions: (1, 1, L) booleans from the one mask helper (the
        causal constraint, and the window if any)."""
        return compute_attention_mask(
            query_length=1,
            key_length=cache_length,
            causal=True,
            window=self.window,
            query_offset=index,
        )

    def call(
        self,
        query,
        context=None,
        query_padding_mask=None,
        context_padding_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        checks.check_floating("query", query.dtype)
        is_cross_attention = context is not None
        query_heads = self._split_heads(self.query_dense(query))
        source = query if context is None else context
        key_heads = self._split_heads(self.key_dense(source))
        value_heads = self._split_heads(self.value_dense(source))
        mask = compute_attention_mask(
            query_length=ops.shape(query_heads)[2],
            key_length=ops.shape(key_heads)[2],
            key_padding_mask=context_padding_mask if is_cross_attention else query_padding_mask,
            causal=self.causal and not is_cross_attention,
            window=None if is_cross_attention else self.window,
            attention_mask=attention_mask,
        )
        attended, weights = scaled_dot_product_attention(
            query_heads,
            key_heads,
            value_heads,
            mask=mask,
            attention_activation=self.attention_activation,
            dropout_layer=self.dropout_layer if self.dropout > 0 else None,
            training=training,
        )
        outputs = self.output_dense(self._merge_heads(attended))
        return (outputs, weights) if return_attention_scores else outputs

    def compute_output_shape(self, query_shape, context_shape=None):
        """(B, T, M): the output has the query's shape whatever the context's width."""
        return tuple(query_shape)

    def compute_output_spec(
        self,
        query,
        context=None,
        query_padding_mask=None,
        context_padding_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        # Spelled out, as `call` returns one or two tensors depending on its flags.
        outputs = keras.KerasTensor(self.compute_output_shape(query.shape), self.compute_dtype)
        if not return_attention_scores:
            return outputs
        key_length = (query if context is None else context).shape[1]
        weights_shape = (query.shape[0], self.num_heads, query.shape[1], key_length)
        return outputs, keras.KerasTensor(weights_shape, self.compute_dtype)

    def compute_mask(self, query, mask=None, **kwargs):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "causal": self.causal,
                "window": self.window,
                "attention_activation": self.attention_activation,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
