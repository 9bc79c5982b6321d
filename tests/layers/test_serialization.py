"""Every layer survives get_config/from_config and a .keras save/load unchanged."""

import numpy as np
import keras
import pytest

from keras_transformer import layers as kt_layers


def _model_around(layer, inputs):
    tensors = [keras.Input(shape=x.shape[1:], dtype=str(x.dtype)) for x in inputs]
    return keras.Model(tensors, layer(*tensors))


CASES = {
    "attention": lambda: (
        kt_layers.MultiHeadSelfAttention(num_heads=2, causal=True, window=3, dropout=0.1),
        [np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")],
    ),
    "head_projection_split": lambda: (
        kt_layers.HeadProjection("split", num_heads=2, head_dim=3, use_bias=False),
        [np.random.default_rng(6).normal(size=(2, 5, 16)).astype("float32")],
    ),
    "head_projection_merge": lambda: (
        kt_layers.HeadProjection("merge", output_dim=6),
        [np.random.default_rng(7).normal(size=(2, 5, 2, 3)).astype("float32")],
    ),
    "positional_learned": lambda: (
        kt_layers.PositionalEncoding(max_length=12, kind="learned"),
        [np.random.default_rng(1).normal(size=(2, 5, 16)).astype("float32")],
    ),
    "feed_forward": lambda: (
        kt_layers.FeedForward(inner_dim=24, activation="gelu"),
        [np.random.default_rng(2).normal(size=(2, 5, 16)).astype("float32")],
    ),
    "encoder_block": lambda: (
        kt_layers.EncoderBlock(num_heads=2, inner_dim=32, norm_first=True, normalize="relu"),
        [np.random.default_rng(3).normal(size=(2, 5, 16)).astype("float32")],
    ),
    "decoder_block": lambda: (
        kt_layers.DecoderBlock(num_heads=2, inner_dim=32, window=2, activation_dropout=0.2),
        [
            np.random.default_rng(4).normal(size=(2, 5, 16)).astype("float32"),
            np.random.default_rng(5).normal(size=(2, 7, 16)).astype("float32"),
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_round_trips_through_config_and_keras_file(name, tmp_path):
    layer, inputs = CASES[name]()
    model = _model_around(layer, inputs)
    expected = np.asarray(model(inputs))

    clone = layer.__class__.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    clone_model = _model_around(clone, inputs)
    clone_model.set_weights(model.get_weights())
    np.testing.assert_allclose(clone_model(inputs), expected, atol=1e-6)

    path = tmp_path / f"{name}.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(restored(inputs), expected, atol=1e-6)
