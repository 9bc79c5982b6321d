"""The decoder-only language model: causality, padding, the cached step, saving,
mixed precision and XLA training."""

import keras
import numpy as np
import pytest

from keras_transformer import build_language_model
from keras_transformer.models import LanguageModel

VOCAB = 24


def _model(seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    return build_language_model("tiny", vocab_size=VOCAB, **overrides)


def _tokens(seed, shape):
    return np.random.default_rng(seed).integers(4, VOCAB, size=shape).astype("int32")


def test_builds_logits_of_the_vocabulary_from_the_tokens_input():
    model = _model()
    assert model.input.name == "tokens"
    logits = model(_tokens(0, (2, 7)))
    assert tuple(logits.shape) == (2, 7, VOCAB)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert not [w.path for w in model.weights if "cross" in w.path or "encoder" in w.path]


@pytest.mark.parametrize("norm_first", [False, True])
def test_future_tokens_do_not_change_past_logits(norm_first):
    model = _model(norm_first=norm_first)
    tokens = _tokens(1, (2, 8))
    logits = np.asarray(model(tokens))
    for position in (1, 4, 7):
        changed = tokens.copy()
        changed[:, position:] = _tokens(2, (2, 8 - position))
        changed_logits = np.asarray(model(changed))
        np.testing.assert_allclose(changed_logits[:, :position], logits[:, :position], atol=1e-5)
        assert np.abs(changed_logits[:, position] - logits[:, position]).max() > 1e-4


def test_right_padding_does_not_change_the_real_positions_logits():
    model = _model()
    tokens = _tokens(3, (2, 5))
    padded = np.concatenate([tokens, np.zeros((2, 4), "int32")], axis=1)
    np.testing.assert_allclose(
        np.asarray(model(padded))[:, :5], np.asarray(model(tokens)), atol=1e-5
    )


@pytest.mark.parametrize("overrides", [{}, {"norm_first": True, "tie_output_embedding": False,
                                            "window": 2}])
def test_cached_token_steps_equal_the_full_pass(overrides):
    model = _model(**overrides)
    tokens = _tokens(4, (3, 6))
    full = np.asarray(model(tokens))
    cache, state = model.start_decoding(3, 6)
    for index in range(6):
        logits, cache = model.decode_token(tokens[:, index], index, cache, state)
        np.testing.assert_allclose(np.asarray(logits), full[:, index], atol=1e-4)


def test_keras_file_round_trip_keeps_config_and_outputs(tmp_path):
    model = _model(norm_first=True)
    tokens = _tokens(5, (2, 6))
    path = tmp_path / "lm.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, LanguageModel)
    assert restored.vocab_size == VOCAB and restored.config == model.config
    np.testing.assert_allclose(np.asarray(restored(tokens)), np.asarray(model(tokens)), atol=1e-6)


def test_mixed_precision_xla_fit_step_trains_with_float32_logits():
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = _model()
    assert keras.backend.standardize_dtype(model(_tokens(6, (1, 4))).dtype) == "float32"
    tokens = _tokens(7, (8, 6))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    before = [np.array(w) for w in model.trainable_weights]
    history = model.fit(tokens[:, :-1], tokens[:, 1:], batch_size=4, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert any(not np.array_equal(b, np.array(w)) for b, w in zip(before, model.trainable_weights))


def test_a_missing_vocabulary_size_is_a_clear_error():
    with pytest.raises(ValueError, match="vocab_size"):
        build_language_model("tiny")
    with pytest.raises(ValueError, match="vocab_size"):
        build_language_model("tiny", vocab_size=0)
