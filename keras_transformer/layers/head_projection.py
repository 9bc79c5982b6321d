"""Dense projections between the model width and attention heads, as 2-D matmuls.

Shape notation: B batch, T length, M model width, H heads, D head size.
"""

import keras
from keras import ops

from keras_transformer.ops import checks

DIRECTIONS = ("split", "merge")


@keras.saving.register_keras_serializable(package="keras_transformer")
class HeadProjection(keras.layers.Layer):
    """Projects (B, T, M) into H heads, or H heads back into (B, T, M).

    The weights are those of `keras.layers.EinsumDense` with the equations of
    `keras.layers.MultiHeadAttention` ("btm,mhd->bthd" and "bthd,hdm->btm": the
    same kernel shapes, hence the same initial scale), but the product is a
    tensordot: one (B·T, K) × (K, N) matmul whose kernel gradient is one more
    matmul. TensorFlow lowers those einsums to a batched matmul with the kernel
    broadcast over B, whose kernel gradient is B products summed afterwards: in a
    CPU training step those batched products and sums took as much time as all the
    plain matmuls (`python -m bench profile`, the tutorial model's rows).

    Args:
        direction: "split" maps (B, T, M) → (B, T, H, D) with a kernel (M, H, D);
            "merge" maps (B, T, H, D) → (B, T, M) with a kernel (H, D, M).
        num_heads: H (used by "split"; "merge" reads it from its input).
        head_dim: D (used by "split").
        output_dim: M (used by "merge").
        use_bias: whether to add a bias ((H, D) for "split", (M,) for "merge").
        kernel_initializer: initializer of the kernel.
        bias_initializer: initializer of the bias.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (B, T, M) for "split", (B, T, H, D) for "merge".

    Returns:
        (B, T, H, D) for "split", (B, T, M) for "merge".

    Example:
        >>> split = HeadProjection("split", num_heads=4, head_dim=16)
        >>> split(keras.random.normal((2, 7, 32))).shape
        (2, 7, 4, 16)
    """

    def __init__(
        self,
        direction,
        num_heads=None,
        head_dim=None,
        output_dim=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.direction = checks.check_choice("direction", direction, DIRECTIONS)
        if self.direction == "split":
            self.num_heads = checks.check_positive_int("num_heads", num_heads)
            self.head_dim = checks.check_positive_int("head_dim", head_dim)
            self.output_dim = None
        else:
            self.num_heads = self.head_dim = None
            self.output_dim = checks.check_positive_int("output_dim", output_dim)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        # Keeps the (B, T) axes, so a Keras mask on the input stays valid.
        self.supports_masking = True

    def build(self, inputs_shape):
        if self.direction == "split":
            checks.check_rank("inputs", inputs_shape, 3)
            kernel_shape = (inputs_shape[-1], self.num_heads, self.head_dim)
            bias_shape = (self.num_heads, self.head_dim)
        else:
            checks.check_rank("inputs", inputs_shape, 4)
            kernel_shape = (inputs_shape[-2], inputs_shape[-1], self.output_dim)
            bias_shape = (self.output_dim,)
        self.kernel = self.add_weight(
            name="kernel", shape=kernel_shape, initializer=self.kernel_initializer
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=bias_shape, initializer=self.bias_initializer
            )
        self.built = True

    def call(self, inputs):
        contracted = 1 if self.direction == "split" else 2
        outputs = ops.tensordot(inputs, self.kernel, axes=contracted)
        if self.bias is not None:
            outputs = outputs + self.bias
        return outputs

    def compute_output_shape(self, inputs_shape):
        if self.direction == "split":
            return (*inputs_shape[:-1], self.num_heads, self.head_dim)
        return (*inputs_shape[:-2], self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "direction": self.direction,
                "num_heads": self.num_heads,
                "head_dim": self.head_dim,
                "output_dim": self.output_dim,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
