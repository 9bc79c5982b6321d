"""Local (windowed) attention and ReLU normalisation."""

import numpy as np
import keras
import pytest

from bench.uncached import make_uncached_greedy
from keras_transformer.decoding import SequenceSearch
from keras_transformer.layers import MultiHeadSelfAttention
from keras_transformer.models import build_transformer
from keras_transformer.ops.masks import compute_attention_mask


def _inputs(seed, shape=(2, 12, 16)):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


@pytest.mark.parametrize("causal", [False, True])
def test_token_outside_every_window_changes_nothing_inside_one_does(causal):
    window, target = 2, 3
    layer = MultiHeadSelfAttention(num_heads=2, window=window, causal=causal)
    x = _inputs(0)
    base = np.asarray(layer(x))
    # Position 11 lies outside the window of positions 0..8 (|i - 11| > 2).
    far = x.copy()
    far[:, 11] += 5.0
    np.testing.assert_allclose(np.asarray(layer(far))[:, : 11 - window], base[:, : 11 - window], atol=1e-5)
    # Position target - 1 lies inside the window of position `target`.
    near = x.copy()
    near[:, target - 1] += 5.0
    assert not np.allclose(np.asarray(layer(near))[:, target], base[:, target], atol=1e-3)


def test_window_at_least_the_length_equals_global_attention():
    x = _inputs(1)
    local = MultiHeadSelfAttention(num_heads=2, window=12, causal=True)
    global_ = MultiHeadSelfAttention(num_heads=2, causal=True)
    local(x)
    global_(x)
    global_.set_weights(local.get_weights())
    np.testing.assert_allclose(local(x), global_(x), atol=1e-6)


def test_window_mask_combines_with_padding_and_causality():
    mask = np.asarray(compute_attention_mask(
        5, 5, key_padding_mask=np.array([[True, True, True, True, False]]), causal=True, window=1
    ))[0]
    expected = np.array([
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [0, 1, 1, 0, 0],
        [0, 0, 1, 1, 0],
        [0, 0, 0, 1, 0],
    ], bool)
    np.testing.assert_array_equal(mask, expected)


def test_relu_normalisation_gives_masked_positions_no_weight():
    x = _inputs(2, (2, 6, 16))
    padding = np.array([[True] * 6, [True] * 3 + [False] * 3])
    layer = MultiHeadSelfAttention(num_heads=2, attention_activation="relu", causal=True)
    outputs, weights = layer(x, query_padding_mask=padding, return_attention_scores=True)
    weights = np.asarray(weights)
    assert np.all(weights >= 0)
    assert np.all(weights[1, :, :, 3:] == 0)  # padded keys
    assert np.all(np.triu(weights[0, 0], k=1) == 0)  # future keys
    # Weights are ReLU(scores) / S: positive entries equal the scaled scores.
    assert np.all(weights <= np.max(weights)) and np.all(np.isfinite(outputs))


def test_relu_outputs_stay_finite_under_mixed_precision():
    keras.config.set_dtype_policy("mixed_bfloat16")
    layer = MultiHeadSelfAttention(num_heads=2, attention_activation="relu")
    x = 50.0 * _inputs(3, (2, 64, 32))  # large activations: large scores
    outputs = np.asarray(layer(x), dtype="float32")
    assert np.all(np.isfinite(outputs))


@pytest.mark.parametrize("variant", [dict(window=2), dict(attention_activation="relu"),
                                     dict(encoder_window=[1, 3], decoder_window=[2, 1],
                                          attention_activation="relu")])
def test_cached_decoding_equals_uncached_for_variants(variant):
    keras.utils.set_random_seed(8)
    model = build_transformer("tiny", source_vocab_size=20, target_vocab_size=20, **variant)
    source = np.random.default_rng(8).integers(4, 20, size=(3, 9)).astype("int32")
    source[1, 5:] = 0
    cached = SequenceSearch(model, max_length=10).greedy(source, max_new_tokens=10)
    uncached = make_uncached_greedy(model, max_length=10)(source)
    np.testing.assert_array_equal(cached["tokens"], uncached)


def test_variants_survive_keras_save_and_load(tmp_path):
    model = build_transformer("tiny", source_vocab_size=20, target_vocab_size=20,
                              window=3, attention_activation="relu")
    inputs = {"encoder_tokens": np.full((1, 5), 7, "int32"), "decoder_tokens": np.full((1, 4), 9, "int32")}
    model.save(tmp_path / "m.keras")
    restored = keras.saving.load_model(tmp_path / "m.keras")
    assert restored.config == model.config
    assert restored.config.decoder.window == 3 and restored.config.attention_activation == "relu"
    np.testing.assert_allclose(restored(inputs), model(inputs), atol=1e-6)
