"""The encoder block: self-attention → add & norm → feed-forward → add & norm.

Shape notation: B batch, S source length, M model width, H heads.
"""

import keras

from keras_transformer.layers.block import TransformerBlock
from keras_transformer.ops import checks
from keras_transformer.ops.masks import resolve_padding_mask


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderBlock(TransformerBlock):
    """One encoder layer of "Attention Is All You Need" (section 3.1).

    Takes the arguments of `TransformerBlock` (num_heads, intermediate_dim, dropout,
    attention_dropout, activation_dropout, activation, norm_first,
    layer_norm_epsilon, window, attention_activation, kernel_initializer).

    Call arguments:
        inputs: (B, S, M).
        padding_mask: optional (B, S) booleans, True for real tokens. When absent,
            the Keras mask carried by `inputs` (e.g. from
            `Embedding(mask_zero=True)`) is used.
        return_attention_scores: also return the (B, H, S, S) self-attention weights.
        training: whether dropout is active.

    Returns:
        (B, S, M), and the attention weights if asked.

    Example:
        >>> block = EncoderBlock(num_heads=2, intermediate_dim=64)
        >>> block(keras.ops.ones((2, 5, 32))).shape
        (2, 5, 32)
    """

    def build(self, inputs_shape):
        checks.check_rank("inputs", inputs_shape, 3)
        self.self_attention = self._make_attention("self_attention", inputs_shape)
        self.self_attention_norm = self._make_norm("self_attention_norm", inputs_shape)
        self.feed_forward = self._make_feed_forward(inputs_shape)
        self.feed_forward_norm = self._make_norm("feed_forward_norm", inputs_shape)
        self.dropout_layer = self._make_dropout()
        self.built = True

    def call(
        self, inputs, padding_mask=None, return_attention_scores=False, training=None, mask=None
    ):
        padding_mask = resolve_padding_mask(padding_mask, mask)
        attended, weights = self.self_attention(
            self._sublayer_input(inputs, self.self_attention_norm),
            query_padding_mask=padding_mask,
            return_attention_scores=True,
            training=training,
        )
        x = self._add_and_norm(inputs, attended, self.self_attention_norm, training)
        transformed = self.feed_forward(
            self._sublayer_input(x, self.feed_forward_norm), training=training
        )
        outputs = self._add_and_norm(x, transformed, self.feed_forward_norm, training)
        return (outputs, weights) if return_attention_scores else outputs

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def compute_output_spec(
        self, inputs, padding_mask=None, return_attention_scores=False, training=None, mask=None
    ):
        outputs = keras.KerasTensor(self.compute_output_shape(inputs.shape), self.compute_dtype)
        if not return_attention_scores:
            return outputs
        return outputs, self.self_attention.compute_output_spec(
            inputs, return_attention_scores=True
        )[1]
