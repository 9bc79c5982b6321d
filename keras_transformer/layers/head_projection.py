"""Dense projections between the model width and attention heads, as 2-D matmuls.

Shape notation: B batch, T length, M model width, H heads, D head size.

Int8 quantization follows Keras 3's for `Dense` (`Model.quantize("int8")` reaches
this layer too): the kernel is stored as int8 with one float scale per output
feature (value = int8 / scale), and a call quantizes its inputs per row and runs
an int8 × int8 → int32 matmul (`keras_transformer.layers.quantization` gives the
kernel back in floats, for the decoding step's fused kernels).
"""

import math

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

    Quantization: `quantize("int8")` (or `Model.quantize("int8")`) replaces the
    kernel by an int8 `kernel` and a float `kernel_scale` shaped like the output
    features ((H, D) for "split", (M,) for "merge"); the layer's dtype policy becomes
    "int8_from_<policy>", so a saved model rebuilds it quantized.

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
        if self.quantization_mode == "int8":  # rebuilt from a quantized model's config
            self._build_int8_kernel(kernel_shape)
        else:
            self.kernel = self.add_weight(
                name="kernel", shape=kernel_shape, initializer=self.kernel_initializer
            )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=bias_shape, initializer=self.bias_initializer
            )
        self.built = True

    @property
    def _contracted_axes(self):
        return 1 if self.direction == "split" else 2

    def _build_int8_kernel(self, kernel_shape):
        self.kernel = self.add_weight(
            name="kernel", shape=kernel_shape, initializer="zeros", dtype="int8",
            trainable=False,
        )
        self.kernel_scale = self.add_weight(
            name="kernel_scale", shape=kernel_shape[self._contracted_axes :],
            initializer="ones", trainable=False,
        )
        # What Keras' layers set once quantized: a new dtype policy then does not
        # quantize again, and a second `quantize` call is refused.
        self._is_quantized = True

    def call(self, inputs):
        outputs = ops.tensordot(inputs, self.kernel, axes=self._contracted_axes)
        if self.bias is not None:
            outputs = outputs + self.bias
        return outputs

    def quantize(self, mode=None, type_check=True, config=None):
        """Stores the kernel as int8 with a scale per output feature (Keras' "int8").

        Args:
            mode: "int8", the one mode this layer supports.
            type_check: refuse subclasses, which may read the kernel differently
                (as Keras' own layers do).
            config: a `keras.quantizers.QuantizationConfig` (its mode is used).
        """
        if type_check and type(self) is not HeadProjection:
            raise NotImplementedError(
                f"{type(self).__name__} does not define quantize(); HeadProjection's "
                "int8 kernel layout may not suit it."
            )
        mode = mode or getattr(config, "mode", None)
        if mode != "int8":
            raise NotImplementedError(
                f"HeadProjection supports mode='int8' only; received mode={mode!r}."
            )
        kernel_shape = tuple(self.kernel.shape)
        inputs_size = math.prod(kernel_shape[: self._contracted_axes])
        values, scale = keras.quantizers.abs_max_quantize(
            ops.reshape(self.kernel, (inputs_size, -1)), axis=0, to_numpy=True
        )
        del self.kernel
        self._build_int8_kernel(kernel_shape)
        self.kernel.assign(ops.reshape(values, kernel_shape))
        self.kernel_scale.assign(ops.reshape(scale, kernel_shape[self._contracted_axes :]))
        if self.dtype_policy.quantization_mode is None:
            self.dtype_policy = keras.dtype_policies.get(f"int8_from_{self.dtype_policy.name}")

    def quantized_call(self, inputs):
        """The int8 call: inputs quantized per row, one int8 × int8 → int32 matmul,
        rescaled to the compute dtype."""
        if self.quantization_mode != "int8":
            raise NotImplementedError(
                f"HeadProjection computes mode='int8' only; its mode is {self.quantization_mode!r}."
            )
        contracted = self._contracted_axes
        kernel_shape = tuple(self.kernel.shape)
        inputs_size = math.prod(kernel_shape[:contracted])
        shape = ops.shape(inputs)
        rows, rows_scale = keras.quantizers.abs_max_quantize(
            ops.reshape(inputs, (-1, inputs_size)), axis=-1
        )
        products = ops.matmul(rows, ops.reshape(self.kernel, (inputs_size, -1)))
        scale = rows_scale * ops.reshape(self.kernel_scale, (1, -1))
        outputs = ops.divide(ops.cast(products, self.compute_dtype), scale)
        outputs = ops.reshape(outputs, (*shape[: len(shape) - contracted],
                                        *kernel_shape[contracted:]))
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

