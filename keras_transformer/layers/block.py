"""What encoder and decoder blocks share: their options and the residual add & norm.

Post-LN (the paper): x = LayerNorm(x + Dropout(Sublayer(x))).
Pre-LN (`norm_first=True`): x = x + Dropout(Sublayer(LayerNorm(x))); stabler for
deep stacks and large learning rates, and needs a final LayerNorm after the stack.
"""

import keras

from keras_transformer.layers.attention import MultiHeadSelfAttention
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.layers.normalization import LayerNormalization
from keras_transformer.ops import checks
from keras_transformer.ops.choices import ATTENTION_ACTIVATIONS


class TransformerBlock(keras.layers.Layer):
    """Base of `EncoderBlock` and `DecoderBlock`: options, norms and residuals.

    Args:
        num_heads: attention heads.
        intermediate_dim: F, width of the feed-forward hidden layer.
        dropout: dropout on each sub-layer's output before the residual add (the
            paper's only dropout inside a block).
        attention_dropout: dropout on the attention weights.
        activation_dropout: dropout on the feed-forward hidden layer (B, T, F);
            off by default, as in the paper, which also spares a training step
            drawing a random mask that size.
        activation: feed-forward activation.
        norm_first: pre-LN when True, the paper's post-LN when False.
        layer_norm_epsilon: epsilon of every LayerNormalization.
        window: optional local-attention window for self-attention.
        attention_activation: "softmax" or "relu": the function that turns attention
            scores into weights (`MultiHeadSelfAttention`); not a layer normalization.
        kernel_initializer: initializer of every kernel; each sub-layer gets its
            own copy (`clone_initializer`).
        **kwargs: `keras.layers.Layer` arguments.
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-6,
        window=None,
        attention_activation="softmax",
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = checks.check_positive_int("num_heads", num_heads)
        self.intermediate_dim = checks.check_positive_int("intermediate_dim", intermediate_dim)
        self.dropout = checks.check_rate("dropout", dropout)
        self.attention_dropout = checks.check_rate("attention_dropout", attention_dropout)
        self.activation_dropout = checks.check_rate("activation_dropout", activation_dropout)
        self.activation = keras.activations.get(activation)
        self.norm_first = bool(norm_first)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.window = checks.check_optional_positive_int("window", window)
        self.attention_activation = checks.check_choice(
            "attention_activation", attention_activation, ATTENTION_ACTIVATIONS
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def _make_norm(self, name, inputs_shape):
        norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build(inputs_shape)
        return norm

    def _make_attention(self, name, inputs_shape, context_shape=None, causal=False):
        """Self-attention (local when `window` is set), or cross-attention with a context."""
        attention = MultiHeadSelfAttention(
            self.num_heads,
            dropout=self.attention_dropout,
            causal=causal,
            window=self.window if context_shape is None else None,
            attention_activation=self.attention_activation,
            kernel_initializer=clone_initializer(self.kernel_initializer, name),
            dtype=self.dtype_policy,
            name=name,
        )
        attention.build(inputs_shape, context_shape)
        return attention

    def _make_feed_forward(self, inputs_shape):
        feed_forward = FeedForward(
            self.intermediate_dim,
            activation=self.activation,
            dropout=self.activation_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer, "feed_forward"),
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        feed_forward.build(inputs_shape)
        return feed_forward

    def _make_dropout(self):
        return keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def _sublayer_input(self, residual, norm):
        """What a sub-layer reads: the normalised stream in pre-LN, the raw one otherwise."""
        return norm(residual) if self.norm_first else residual

    def _add_and_norm(self, residual, sublayer_output, norm, training):
        """Adds the (dropped-out) sub-layer output to the stream, then post-LN."""
        outputs = residual + self.dropout_layer(sublayer_output, training=training)
        return outputs if self.norm_first else norm(outputs)

    def compute_mask(self, inputs, mask=None, **kwargs):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "activation": keras.activations.serialize(self.activation),
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "window": self.window,
                "attention_activation": self.attention_activation,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
