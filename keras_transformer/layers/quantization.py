"""Weights of possibly quantized layers, read back in floats.

Keras 3's int8 quantization (`Model.quantize("int8")`, and `HeadProjection.quantize`
in the same layout) stores int8 values with a float scale per output feature or
per vocabulary row: the weight is value / scale. Layers compute with them directly;
code that lays kernels out once ahead of a loop (the decoding step's fused kernels,
the output projection) reads them here, so the loop itself runs float matmuls.
"""

from keras import ops


def float_kernel(layer):
    """The kernel of a `HeadProjection` or `keras.layers.Dense`, in floats.

    An int8-quantized layer stores int8 values and a scale per output feature
    (value / scale is the weight); this gives the weights back, once, for code
    that lays kernels out ahead of a loop (the decoding step).

    Args:
        layer: a built `HeadProjection` or `keras.layers.Dense`.

    Returns:
        The kernel as a tensor in the layer's variable dtype (float32 for an
        int8 layer).
    """
    if layer.quantization_mode == "int8":
        return ops.divide(ops.cast(layer.kernel, "float32"), layer.kernel_scale)
    if layer.quantization_mode is not None:
        raise ValueError(
            f"Layer {layer.name!r} is quantized with mode={layer.quantization_mode!r}; "
            "the decoding step reads float or int8 kernels only."
        )
    return ops.convert_to_tensor(layer.kernel)


def float_embeddings(embedding):
    """The (V, M) table of a `keras.layers.Embedding` (or `ReversibleEmbedding`) in floats."""
    if embedding.quantization_mode == "int8":
        return ops.divide(ops.cast(embedding.embeddings, "float32"),
                          embedding.embeddings_scale[:, None])
    return ops.convert_to_tensor(embedding.embeddings)


def float_reverse_embeddings(embedding):
    """The untied (M, V) output projection of a `ReversibleEmbedding`, in floats."""
    if embedding.quantization_mode == "int8":
        return ops.divide(ops.cast(embedding.reverse_embeddings, "float32"),
                          embedding.reverse_embeddings_scale)
    return ops.convert_to_tensor(embedding.reverse_embeddings)
