"""HeadProjection: EinsumDense's math and weights, computed as plain matmuls."""

import numpy as np
import keras
import pytest
import tensorflow as tf

from keras_transformer.layers import HeadProjection
from layer_helpers import run_layer_test

CASES = {
    # direction: (HeadProjection kwargs, EinsumDense equation, output shape, bias axes, input)
    "split": (dict(num_heads=3, head_dim=4), "btm,mhd->bthd", (None, 3, 4), "hd", (2, 5, 8)),
    "merge": (dict(output_dim=8), "bthd,hdm->btm", (None, 8), "m", (2, 5, 3, 4)),
}


def _pair(direction):
    kwargs, equation, output_shape, bias_axes, input_shape = CASES[direction]
    ours = HeadProjection(direction, **kwargs)
    ours.build(input_shape)
    reference = keras.layers.EinsumDense(equation, output_shape=output_shape, bias_axes=bias_axes)
    reference.build(input_shape)
    rng = np.random.default_rng(0)
    for variable in ours.weights:
        variable.assign(rng.normal(size=variable.shape).astype("float32"))
    reference.set_weights(ours.get_weights())
    inputs = rng.normal(size=input_shape).astype("float32")
    return ours, reference, tf.constant(inputs)


@pytest.mark.parametrize("direction", sorted(CASES))
def test_outputs_and_gradients_equal_einsum_dense_with_the_same_weights(direction):
    ours, reference, inputs = _pair(direction)
    results = []
    for layer in (ours, reference):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = layer(inputs)
            loss = tf.reduce_sum(outputs**2)
        results.append((outputs, *tape.gradient(loss, [inputs, *layer.trainable_weights])))
    for got, expected in zip(*results):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("direction", sorted(CASES))
def test_kernel_gradient_is_one_matmul_not_a_batched_product_summed(direction):
    ours, _, inputs = _pair(direction)

    @tf.function
    def kernel_gradient(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(ours(x))
        return tape.gradient(loss, ours.kernel)

    graph = kernel_gradient.get_concrete_function(inputs).graph
    op_types = {op.type for op in graph.get_operations()}
    assert "MatMul" in op_types
    assert not op_types & {"BatchMatMulV2", "BatchMatMulV3", "Einsum"}, op_types


@pytest.mark.parametrize("direction", sorted(CASES))
def test_head_projection_keeps_the_layer_contract(direction, tmp_path):
    kwargs, _, output_shape, _, input_shape = CASES[direction]
    run_layer_test(
        HeadProjection,
        dict(direction=direction, **kwargs),
        {"inputs": np.random.default_rng(2).normal(size=input_shape).astype("float32")},
        expected_output_shape=(input_shape[0], input_shape[1], *output_shape[1:]),
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("sideways",), dict(num_heads=2, head_dim=4), "direction"),
        (("split",), dict(num_heads=0, head_dim=4), "num_heads"),
        (("split",), dict(num_heads=2), "head_dim"),
        (("merge",), dict(), "output_dim"),
    ],
)
def test_bad_arguments_name_the_argument(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        HeadProjection(*args, **kwargs)


def test_wrong_input_rank_is_rejected():
    with pytest.raises(ValueError, match="inputs"):
        HeadProjection("merge", output_dim=8).build((2, 5, 12))


@pytest.mark.parametrize("direction,shape", [("split", (2, 5, 16)), ("merge", (2, 5, 4, 8))])
def test_int8_quantization_stays_close_and_survives_a_keras_file(direction, shape, tmp_path):
    from keras_transformer.layers.quantization import float_kernel

    sizes = {"num_heads": 4, "head_dim": 8} if direction == "split" else {"output_dim": 16}
    inputs = keras.Input(shape[1:])
    layer = HeadProjection(direction, **sizes)
    model = keras.Model(inputs, layer(inputs))
    x = keras.random.normal(shape, seed=1)
    expected, kernel = np.asarray(model(x)), np.asarray(layer.kernel)
    model.quantize("int8")
    assert layer.kernel.dtype == "int8" and layer.quantization_mode == "int8"
    # Weights within half a quantization step; outputs within int8's error.
    features = int(np.prod(kernel.shape[1 if direction == "split" else 2 :]))
    step = np.abs(kernel).reshape(-1, features).max(axis=0) / 127
    error = np.abs(np.asarray(float_kernel(layer)) - kernel).reshape(-1, features)
    assert np.all(error <= step / 2 + 1e-6)
    np.testing.assert_allclose(np.asarray(model(x)), expected, atol=0.05)
    model.save(tmp_path / "int8.keras")
    restored = keras.saving.load_model(tmp_path / "int8.keras")
    np.testing.assert_array_equal(np.asarray(restored(x)), np.asarray(model(x)))
