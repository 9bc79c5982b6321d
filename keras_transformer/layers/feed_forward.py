"""The position-wise feed-forward network: Dense(F, activation) → Dense(d_model).

Shape notation: B batch, T length, M model width, F intermediate width.
"""

import keras

from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.ops import checks


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(keras.layers.Layer):
    """Two dense layers applied at every position alike (the paper, section 3.3).

    Args:
        intermediate_dim: F, width of the hidden layer.
        activation: activation of the hidden layer ("relu" in the paper).
        dropout: dropout rate after the activation.
        kernel_initializer: initializer of both kernels (each gets its own copy:
            the two have the same size, and one object would give them the same
            numbers).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (B, T, M).
        training: whether dropout is active.

    Returns:
        (B, T, M).
    """

    def __init__(
        self,
        intermediate_dim,
        activation="relu",
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.intermediate_dim = checks.check_positive_int("intermediate_dim", intermediate_dim)
        self.activation = keras.activations.get(activation)
        self.dropout = checks.check_rate("dropout", dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        checks.check_rank("inputs", inputs_shape, 3)
        model_dim = inputs_shape[-1]
        self.inner_dense = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer, "inner_dense"),
            dtype=self.dtype_policy,
            name="inner_dense",
        )
        self.inner_dense.build(inputs_shape)
        self.output_dense = keras.layers.Dense(
            model_dim,
            kernel_initializer=clone_initializer(self.kernel_initializer, "output_dense"),
            dtype=self.dtype_policy,
            name="output_dense",
        )
        self.output_dense.build((*inputs_shape[:-1], self.intermediate_dim))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(self, inputs, training=None):
        hidden = self.dropout_layer(self.inner_dense(inputs), training=training)
        return self.output_dense(hidden)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "activation": keras.activations.serialize(self.activation),
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
