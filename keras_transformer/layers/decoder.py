"""The decoder block: causal self-attention → add & norm → cross-attention → add &
norm → feed-forward → add & norm; without the cross-attention, the block of a
decoder-only language model.

Shape notation: B batch, T target length, S source length, M model width, H heads,
D head size, L cache length.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.layers.block import TransformerBlock
from keras_transformer.layers.quantization import float_kernel
from keras_transformer.ops import checks
from keras_transformer.ops.activations import step_activation
from keras_transformer.ops.masks import resolve_padding_mask
from keras_transformer.ops.normalization import layer_norm


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderBlock(TransformerBlock):
    """One decoder layer of "Attention Is All You Need" (section 3.1).

    The self-attention is causal: position i sees only positions <= i. The
    cross-attention attends to the encoder's output. Takes the arguments of
    `TransformerBlock`, and:

    Args:
        cross_attention: False builds the block without cross-attention (causal
            self-attention → add & norm → feed-forward → add & norm), the block of a
            decoder-only (GPT-style) language model; it then takes no encoder
            arguments.

    Call arguments:
        inputs: (B, T, M) target-side stream.
        encoder_outputs: (B, S, M) encoder output.
        decoder_padding_mask: optional (B, T) booleans, True for real tokens. When
            absent, the Keras mask carried by `inputs` (e.g. from
            `Embedding(mask_zero=True)`) is used.
        encoder_padding_mask: optional (B, S) booleans, True for real tokens.
        return_attention_scores: also return the self-attention (B, H, T, T)
            and cross-attention (B, H, T, S) weights (the self-attention weights
            alone without cross-attention).
        training: whether dropout is active.

    Returns:
        outputs (B, T, M); then `(self_weights, cross_weights)` (or `self_weights`)
        if asked.

    Decoding runs one token per step through `decode_token` (weights read once by
    `decoding_weights`, the cross-attention's keys and values by
    `compute_cross_attention_cache`).

    Example:
        >>> block = DecoderBlock(num_heads=2, intermediate_dim=64, cross_attention=False)
        >>> block(keras.ops.ones((2, 5, 32))).shape
        (2, 5, 32)
    """

    def __init__(self, num_heads, intermediate_dim, cross_attention=True, **kwargs):
        super().__init__(num_heads, intermediate_dim, **kwargs)
        # `self.cross_attention` names the sub-layer, hence another attribute name.
        self.has_cross_attention = bool(cross_attention)

    def build(self, inputs_shape, encoder_outputs_shape=None):
        checks.check_rank("inputs", inputs_shape, 3)
        self.self_attention = self._make_attention("self_attention", inputs_shape, causal=True)
        self.self_attention_norm = self._make_norm("self_attention_norm", inputs_shape)
        if self.has_cross_attention:
            if encoder_outputs_shape is None:
                encoder_outputs_shape = inputs_shape
            checks.check_rank("encoder_outputs", encoder_outputs_shape, 3)
            self.cross_attention = self._make_attention(
                "cross_attention", inputs_shape, context_shape=encoder_outputs_shape
            )
            self.cross_attention_norm = self._make_norm("cross_attention_norm", inputs_shape)
        else:
            self.cross_attention = self.cross_attention_norm = None
        self.feed_forward = self._make_feed_forward(inputs_shape)
        self.feed_forward_norm = self._make_norm("feed_forward_norm", inputs_shape)
        self.dropout_layer = self._make_dropout()
        self.built = True

    def compute_cross_attention_cache(self, encoder_outputs):
        """Projects the encoder output once: (B, S, M) → (B, 2, H, S, D)."""
        self._check_cross_attention("compute_cross_attention_cache")
        return self.cross_attention.compute_key_value(encoder_outputs)

    def decoding_weights(self):
        """What `decode_token` reads, as tensors read once per search: both
        attentions' `decoding_weights`, the norms' scales and offsets and the
        feed-forward kernels (a step then reads no variable)."""
        norms = {}
        names = ("self_attention_norm", "feed_forward_norm")
        if self.has_cross_attention:
            names += ("cross_attention_norm",)
        for name in names:
            norm = getattr(self, name)
            norms[name] = tuple(
                None if w is None else tf.identity(w) for w in (norm.gamma, norm.beta)
            )
        feed_forward = []
        for dense in (self.feed_forward.inner_dense, self.feed_forward.output_dense):
            kernel = ops.cast(float_kernel(dense), self.compute_dtype)
            bias = None if dense.bias is None else ops.cast(dense.bias, self.compute_dtype)
            feed_forward.append((kernel, bias, step_activation(dense.activation)))
        return {
            "self_attention": self.self_attention.decoding_weights(),
            "cross_attention": (
                self.cross_attention.decoding_weights() if self.has_cross_attention else None
            ),
            "norms": norms,
            "feed_forward": feed_forward,
        }

    def decode_token(self, x, weights, write_cache, cross_cache, self_mask, cross_mask,
                     return_cross_weights=False):
        """Runs the block on one token per row, as `call` does at that position.

        Args:
            x: (B, M) the stream at the current position.
            weights: from `decoding_weights`.
            write_cache: function that takes this step's keys and values, each
                (B, H, 1, D), writes them into this block's self-attention cache
                and returns the cache's keys and values, each (B, H, L, D).
            cross_cache: (keys, values) of the encoder output, each (B, H, S, D);
                None without cross-attention.
            self_mask: booleans broadcastable to (B, H, 1, L), True for the cache
                positions this step sees (`cache_token_mask`).
            cross_mask: booleans broadcastable to (B, H, 1, S), True for real source
                tokens; None without cross-attention.
            return_cross_weights: also return the cross-attention weights,
                (B, H, 1, S) float32 (the block must have cross-attention).

        Returns:
            (B, M) outputs; with `return_cross_weights`, `(outputs, cross_weights)`.
        """

        def normalize(x, name):
            # LayerNormalization's formula on (B, M) rows with its scale and offset
            # read once per search (the layer reads and reshapes them at every call).
            norm = getattr(self, name)
            gamma, beta = weights["norms"][name]
            if norm.rms_scaling:
                outputs = ops.layer_normalization(
                    x, gamma, beta, norm.axis, norm.epsilon, rms_scaling=True
                )
            else:
                # The training formula's forward pass, in float32: 9 ops a norm, where
                # `tf.nn.moments` and `tf.nn.batch_normalization` take 11 (a step runs 9).
                outputs = layer_norm(x, gamma, beta, norm.epsilon)
            return ops.cast(outputs, norm.compute_dtype)

        def sublayer_input(x, name):  # as `_sublayer_input`
            return normalize(x, name) if self.norm_first else x

        def add_and_norm(x, outputs, name):  # as `_add_and_norm` without dropout
            x = x + outputs
            return x if self.norm_first else normalize(x, name)

        attention = self.self_attention
        query, new_keys_values = attention.project_token(
            sublayer_input(x, "self_attention_norm"), weights["self_attention"]
        )
        keys, values = write_cache(*new_keys_values)
        attended = attention.attend_token(query, keys, values, self_mask, weights["self_attention"])
        x = add_and_norm(x, attended, "self_attention_norm")

        cross_weights = None
        if self.has_cross_attention:
            attention = self.cross_attention
            query, _ = attention.project_token(
                sublayer_input(x, "cross_attention_norm"), weights["cross_attention"]
            )
            attended, cross_weights = attention.attend_token(
                query, *cross_cache, cross_mask, weights["cross_attention"], return_weights=True
            )
            x = add_and_norm(x, attended, "cross_attention_norm")
        elif return_cross_weights:
            self._check_cross_attention("return_cross_weights")

        transformed = sublayer_input(x, "feed_forward_norm")
        for kernel, bias, activation in weights["feed_forward"]:  # FeedForward's two Dense
            transformed = tf.matmul(transformed, kernel)
            if bias is not None:
                transformed = tf.nn.bias_add(transformed, bias)
            transformed = activation(transformed)
        outputs = add_and_norm(x, transformed, "feed_forward_norm")
        return (outputs, cross_weights) if return_cross_weights else outputs

    def call(
        self,
        inputs,
        encoder_outputs=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        return_attention_scores=False,
        training=None,
        mask=None,
    ):
        if not self.has_cross_attention and encoder_outputs is not None:
            self._check_cross_attention("encoder_outputs")
        decoder_padding_mask = resolve_padding_mask(decoder_padding_mask, mask)
        attended, self_weights = self.self_attention(
            self._sublayer_input(inputs, self.self_attention_norm),
            query_padding_mask=decoder_padding_mask,
            return_attention_scores=True,
            training=training,
        )
        x = self._add_and_norm(inputs, attended, self.self_attention_norm, training)

        attention_scores = self_weights
        if self.has_cross_attention:
            attended, cross_weights = self.cross_attention(
                self._sublayer_input(x, self.cross_attention_norm),
                context=encoder_outputs,
                query_padding_mask=decoder_padding_mask,
                context_padding_mask=encoder_padding_mask,
                return_attention_scores=True,
                training=training,
            )
            x = self._add_and_norm(x, attended, self.cross_attention_norm, training)
            attention_scores = (self_weights, cross_weights)

        transformed = self.feed_forward(
            self._sublayer_input(x, self.feed_forward_norm), training=training
        )
        outputs = self._add_and_norm(x, transformed, self.feed_forward_norm, training)
        return (outputs, attention_scores) if return_attention_scores else outputs

    def compute_output_shape(self, inputs_shape, encoder_outputs_shape=None):
        return tuple(inputs_shape)

    def compute_output_spec(
        self,
        inputs,
        encoder_outputs=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        return_attention_scores=False,
        training=None,
        mask=None,
    ):
        # Spelled out, as `call` returns one or two results depending on its arguments.
        outputs = keras.KerasTensor(self.compute_output_shape(inputs.shape), self.compute_dtype)
        if not return_attention_scores:
            return outputs
        self_spec = self.self_attention.compute_output_spec(inputs, return_attention_scores=True)
        if not self.has_cross_attention:
            return outputs, self_spec[1]
        cross_spec = self.cross_attention.compute_output_spec(
            inputs, context=encoder_outputs, return_attention_scores=True
        )
        return outputs, (self_spec[1], cross_spec[1])

    def _check_cross_attention(self, what):
        if not self.has_cross_attention:
            raise ValueError(
                f"{what} needs a block with cross-attention; this DecoderBlock was built "
                "with `cross_attention=False` (a decoder-only block takes no encoder inputs)."
            )

    def get_config(self):
        config = super().get_config()
        config.update({"cross_attention": self.has_cross_attention})
        return config
