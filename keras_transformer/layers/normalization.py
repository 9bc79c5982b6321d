"""`keras.layers.LayerNormalization` with a cheaper backward pass.

The same layer, variables and config as Keras' (checkpoints and saved configs
carry over); over the last axis with a scale and an offset, the case of every
Transformer block, it trains through `ops.normalization.trainable_layer_norm`,
whose gradient is written in closed form. Other settings (other axes, RMS
scaling, no scale or no offset) are left to Keras' own computation.
"""

import keras

from keras_transformer.ops.normalization import trainable_layer_norm


@keras.saving.register_keras_serializable(package="keras_transformer")
class LayerNormalization(keras.layers.LayerNormalization):
    """Layer normalization over the last axis: γ·(x - mean) / sqrt(var + ε) + β.

    Args:
        Those of `keras.layers.LayerNormalization`.

    Call arguments:
        inputs: (..., M) tensor.

    Returns:
        (..., M) tensor of the layer's compute dtype (computed in float32).

    Example:
        >>> norm = LayerNormalization(epsilon=1e-6)
        >>> norm(np.ones((2, 3, 8), "float32")).shape
        (2, 3, 8)
    """

    def _closed_form(self, rank):
        axes = [self.axis] if isinstance(self.axis, int) else list(self.axis)
        return (
            axes in ([-1], [rank - 1])
            and self.gamma is not None
            and self.beta is not None
            and not self.rms_scaling
        )

    def call(self, inputs):
        if not self._closed_form(len(inputs.shape)):
            return super().call(inputs)
        outputs = trainable_layer_norm(inputs, self.gamma, self.beta, self.epsilon)
        return keras.ops.cast(outputs, self.compute_dtype)
