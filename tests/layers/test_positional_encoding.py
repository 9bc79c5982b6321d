import math

import numpy as np
import pytest

from keras_transformer.layers import PositionalEncoding
from layer_helpers import run_layer_test


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_positional_encoding_keeps_the_layer_contract(kind, tmp_path):
    run_layer_test(
        PositionalEncoding,
        dict(max_length=12, kind=kind),
        {"inputs": np.random.default_rng(1).normal(size=(2, 5, 16)).astype("float32")},
        expected_output_shape=(2, 5, 16),
        tmp_path=tmp_path,
    )


def test_sinusoids_follow_the_paper_formula():
    layer = PositionalEncoding(max_length=50, scale_embeddings=False)
    encoded = np.asarray(layer(np.zeros((1, 20, 16), "float32")))[0]
    for position in (0, 3, 19):
        for i in range(8):
            angle = position / 10000 ** (2 * i / 16)
            assert encoded[position, 2 * i] == pytest.approx(math.sin(angle), abs=1e-5)
            assert encoded[position, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-5)


def test_embeddings_are_scaled_by_sqrt_d_model():
    layer = PositionalEncoding(max_length=50)
    ones = np.ones((1, 4, 16), "float32")
    unscaled = PositionalEncoding(max_length=50, scale_embeddings=False)
    difference = np.asarray(layer(ones)) - np.asarray(unscaled(ones))
    np.testing.assert_allclose(difference, 4.0 - 1.0, atol=1e-5)


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_start_index_encodes_a_single_token_as_in_a_full_pass(kind):
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(2, 9, 16)).astype("float32")
    layer = PositionalEncoding(max_length=32, kind=kind)
    full = np.asarray(layer(inputs))
    for t in (0, 4, 8):
        single = np.asarray(layer(inputs[:, t : t + 1], start_index=t))
        np.testing.assert_allclose(single[:, 0], full[:, t], atol=1e-5)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="kind"):
        PositionalEncoding(kind="rotary")
    with pytest.raises(ValueError, match="max_length"):
        PositionalEncoding(max_length=0)
    with pytest.raises(ValueError, match="even d_model"):
        PositionalEncoding()(np.zeros((1, 3, 7), "float32"))
