"""LayerNormalization: Keras' layer, numbers and gradients, with a closed-form backward pass."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from graph_ops import gradient_op_types

from keras_transformer.layers import DecoderBlock
from keras_transformer.layers import EncoderBlock
from keras_transformer.layers.normalization import LayerNormalization


def _pair(shape, **kwargs):
    """Ours and Keras' layer with the same (non-trivial) scale and offset."""
    rng = np.random.default_rng(0)
    ours, stock = LayerNormalization(**kwargs), keras.layers.LayerNormalization(**kwargs)
    for layer in (ours, stock):
        layer.build(shape)
    for ours_weight, stock_weight in zip(ours.weights, stock.weights):
        values = rng.normal(1.0, 0.3, size=stock_weight.shape).astype("float32")
        ours_weight.assign(values)
        stock_weight.assign(values)
    return ours, stock


def _outputs_and_gradients(layer, inputs, upstream):
    inputs = tf.constant(inputs)
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = layer(inputs)
        loss = tf.reduce_sum(tf.cast(outputs, tf.float32) * upstream)
    gradients = tape.gradient(loss, [inputs] + layer.trainable_weights)
    return [np.asarray(tf.cast(t, tf.float32)) for t in [outputs] + gradients]


@pytest.mark.filterwarnings("ignore:You passed `rms_scaling=True`")
@pytest.mark.parametrize("shape, kwargs", [
    ((3, 7, 16), dict(epsilon=1e-6)),
    ((5, 16), dict(epsilon=1e-3)),
    ((3, 7, 16), dict(rms_scaling=True)),       # Keras' own computation
    ((3, 7, 16), dict(center=False)),           # Keras' own computation
    ((3, 16, 7), dict(axis=1)),                 # Keras' own computation
])
def test_outputs_and_gradients_equal_keras_layer_normalization(shape, kwargs):
    rng = np.random.default_rng(1)
    inputs = (rng.normal(size=shape) * 3 + 2).astype("float32")
    upstream = rng.normal(size=shape).astype("float32")
    ours, stock = _pair(shape, **kwargs)
    for got, expected in zip(_outputs_and_gradients(ours, inputs, upstream),
                             _outputs_and_gradients(stock, inputs, upstream)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_mixed_precision_computes_in_float32_and_returns_bfloat16():
    shape = (2, 4, 16)
    inputs = np.random.default_rng(2).normal(size=shape).astype("float32")
    upstream = np.ones(shape, "float32")
    ours, stock = _pair(shape, dtype="mixed_bfloat16")
    assert ours(inputs).dtype == "bfloat16"
    for got, expected in zip(_outputs_and_gradients(ours, inputs, upstream),
                             _outputs_and_gradients(stock, inputs, upstream)):
        np.testing.assert_allclose(got, expected, rtol=2e-2, atol=2e-2)


def test_backward_pass_is_the_closed_form_in_the_layer_and_in_every_block():
    # Differentiating the forward formula leaves an RsqrtGrad (and the Tiles of the
    # moments' gradients); the closed form has none.
    shape = (2, 5, 8)
    stock = keras.layers.LayerNormalization()
    stock.build(shape)
    assert gradient_op_types(stock, shape)["RsqrtGrad"] == 1  # the marker is sound
    ours = LayerNormalization()
    ours.build(shape)
    encoder, decoder = EncoderBlock(2, 16), DecoderBlock(2, 16)
    encoder.build(shape)
    decoder.build(shape)
    for layer in (ours, encoder, decoder):
        assert gradient_op_types(layer, shape)["RsqrtGrad"] == 0, layer.name


def test_a_saved_model_reloads_with_our_layer_and_its_outputs(tmp_path):
    inputs = keras.Input((5, 16))
    model = keras.Model(inputs, LayerNormalization(epsilon=1e-5, name="norm")(inputs))
    model.get_layer("norm").gamma.assign(np.linspace(0.5, 1.5, 16).astype("float32"))
    data = np.random.default_rng(3).normal(size=(2, 5, 16)).astype("float32")
    model.save(tmp_path / "model.keras")
    restored = keras.models.load_model(tmp_path / "model.keras")
    assert type(restored.get_layer("norm")) is LayerNormalization
    assert restored.get_layer("norm").get_config() == model.get_layer("norm").get_config()
    np.testing.assert_allclose(restored(data), model(data), atol=1e-6)


def test_weights_are_named_as_keras_so_checkpoints_carry_over():
    ours, stock = _pair((2, 8))
    assert [w.path for w in ours.weights] == [w.path.replace(stock.name, ours.name)
                                             for w in stock.weights]
