"""`--quantize`: the weights an export stores and computes with.

- "none": the model as trained (float32, or its mixed policy's variables).
- "int8": Keras 3's int8 quantization (`Model.quantize("int8")`): every `Dense`,
  `ReversibleEmbedding` and `HeadProjection` keeps int8 weights with a float scale
  per output feature (per vocabulary row for embeddings). The full passes (encoder,
  scoring, classification) run int8 matmuls on inputs quantized per row; the
  decoding step dequantizes the kernels once per search and runs float32 matmuls,
  because it is bound by per-op overhead, which the dynamic input quantization
  (five more ops per matmul) would only add to (docs/guides/export-formats.md).
- "bfloat16": the model rebuilt under Keras' "bfloat16" dtype policy, the
  weights cast: variables and matmuls in bfloat16, layer normalization, softmax
  and the logits in float32 (as the layers do under any policy).

Every mode keeps to core TensorFlow ops, so stock TF Serving loads the export.
"""

import gc

import keras

from keras_transformer.layers.head_projection import HeadProjection

QUANTIZATIONS = ("none", "int8", "bfloat16")

# The layers with an int8 form: Keras' own and ours.
_INT8_LAYERS = (keras.layers.Dense, keras.layers.EinsumDense, keras.layers.Embedding,
                HeadProjection)


def _int8_layer(layer):
    return isinstance(layer, _INT8_LAYERS)


def quantize_model(model, mode):
    """The model an export of quantization `mode` runs.

    Args:
        model: a built Keras model of this package (translator, language model or
            classifier), float32 or mixed precision.
        mode: one of `QUANTIZATIONS`.

    Returns:
        `model` itself for "none"; for "int8" the same model, quantized in place;
        for "bfloat16" a new model of the same class and config with the weights
        cast.

    Raises:
        ValueError: for an unknown mode (and Keras' own, for an int8 model quantized
            again).
    """
    if mode not in QUANTIZATIONS:
        raise ValueError(f"--quantize must be one of {', '.join(QUANTIZATIONS)}; "
                         f"received {mode!r}.")
    if mode == "none":
        return model
    if mode == "int8":
        # Keras runs a full `gc.collect()` for every float kernel a layer drops as it
        # quantizes (dozens per model), each walking every object of the process:
        # frozen, the objects that existed before are skipped (seconds per export).
        gc.freeze()
        try:
            model.quantize("int8", filters=_int8_layer)
        finally:
            gc.unfreeze()
        return model
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("bfloat16")
    try:
        rebuilt = type(model).from_config(model.get_config())
    finally:
        keras.config.set_dtype_policy(previous)
    rebuilt.set_weights(model.get_weights())
    return rebuilt
