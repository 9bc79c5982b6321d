"""Positional encodings: the paper's sinusoids, or learned position embeddings.

Shape notation: B batch, T sequence length, M model width (d_model).
"""

import math

import keras
from keras import ops

from keras_transformer.ops import checks
from keras_transformer.ops.choices import POSITIONAL_KINDS as KINDS


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEncoding(keras.layers.Layer):
    """Scales token embeddings by √M and adds a position signal.

    "sinusoidal" (the paper, section 3.5): PE(p, 2i) = sin(p / 10000^(2i/M)),
    PE(p, 2i+1) = cos(p / 10000^(2i/M)), computed for any position, so no maximum
    length applies. "learned": a trainable (max_length, M) table.

    Args:
        max_length: longest sequence for the learned table; for sinusoids, only
            recorded (any length works).
        kind: "sinusoidal" or "learned".
        scale_embeddings: multiply the inputs by √M first (the paper, section 3.4).
        embeddings_initializer: initializer of the learned table.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (B, T, M) token embeddings.
        start_index: position of `inputs[:, 0]` (int or scalar tensor), so that a
            single token at position t is encoded as it would be in a full pass.

    Returns:
        (B, T, M): inputs·√M + PE[start_index : start_index + T].

    Example:
        >>> layer = PositionalEncoding(max_length=128)
        >>> layer(keras.ops.zeros((2, 5, 16)), start_index=3).shape
        (2, 5, 16)
    """

    def __init__(
        self,
        max_length=512,
        kind="sinusoidal",
        scale_embeddings=True,
        embeddings_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.max_length = checks.check_positive_int("max_length", max_length)
        self.kind = checks.check_choice("kind", kind, KINDS)
        self.scale_embeddings = bool(scale_embeddings)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        checks.check_rank("inputs", inputs_shape, 3)
        self.model_dim = inputs_shape[-1]
        if self.kind == "sinusoidal" and self.model_dim % 2:
            raise ValueError(
                "Sinusoidal positional encoding needs an even d_model (sin and cos "
                f"pairs); received d_model={self.model_dim}. Use an even width or "
                'kind="learned".'
            )
        if self.kind == "learned":
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.max_length, self.model_dim),
                initializer=self.embeddings_initializer,
            )
        self.built = True

    def position_signal(self, length, start_index=0):
        """Returns the (T, M) encoding of positions start_index .. start_index+T-1."""
        if self.kind == "learned":
            table = ops.convert_to_tensor(self.position_embeddings)
            return ops.slice(table, [start_index, 0], [length, self.model_dim])
        positions = ops.cast(ops.arange(length) + start_index, "float32")
        # Frequencies 1 / 10000^(2i/M) for i = 0 .. M/2 - 1.
        exponents = ops.arange(0, self.model_dim, 2, dtype="float32") / self.model_dim
        frequencies = ops.exp(-math.log(10000.0) * exponents)
        angles = positions[:, None] * frequencies[None, :]  # (T, M/2)
        # Interleave so even features are sines and odd ones cosines, as in the paper.
        signal = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)
        return ops.reshape(signal, (length, self.model_dim))

    def call(self, inputs, start_index=0):
        checks.check_floating("inputs", inputs.dtype)
        length = ops.shape(inputs)[1]
        signal = ops.cast(self.position_signal(length, start_index), inputs.dtype)
        if self.scale_embeddings:
            inputs = inputs * ops.cast(math.sqrt(self.model_dim), inputs.dtype)
        return inputs + signal[None]

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "kind": self.kind,
                "scale_embeddings": self.scale_embeddings,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
