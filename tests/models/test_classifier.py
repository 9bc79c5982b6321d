"""The encoder-only classifier: pooling over real tokens, the Keras mask, saving,
mixed precision and XLA training."""

import keras
import numpy as np
import pytest

from keras_transformer import build_classifier
from keras_transformer.models import EncoderClassifier

VOCAB, CLASSES = 24, 3


def _model(seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    return build_classifier("tiny", vocab_size=VOCAB, num_classes=CLASSES, **overrides)


def _rows(seed, lengths, width):
    rng = np.random.default_rng(seed)
    tokens = np.zeros((len(lengths), width), "int32")
    for row, length in enumerate(lengths):
        tokens[row, :length] = rng.integers(4, VOCAB, size=length)
    return tokens


def test_builds_float32_class_logits_from_the_tokens_input():
    model = _model()
    assert model.input.name == "tokens"
    logits = model(_rows(0, [5, 3], 5))
    assert tuple(logits.shape) == (2, CLASSES)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"


@pytest.mark.parametrize("norm_first", [False, True])
def test_appending_padding_does_not_change_the_logits(norm_first):
    model = _model(norm_first=norm_first)
    tokens = _rows(1, [6, 2, 4], 6)
    logits = np.asarray(model(tokens))
    padded = np.concatenate([tokens, np.zeros((3, 5), "int32")], axis=1)
    np.testing.assert_allclose(np.asarray(model(padded)), logits, atol=1e-5)


def test_keras_mask_path_equals_the_explicit_padding_mask_path():
    """The classifier's layers fed by Embedding(mask_zero=True), with no explicit
    mask anywhere, give the classifier's logits."""
    model = _model()
    tokens = _rows(2, [6, 3], 6)
    table = model.backbone.get_layer("source_embedding").embeddings
    embedding = keras.layers.Embedding(VOCAB, table.shape[1], mask_zero=True)
    embedding.build((None, None))
    embedding.set_weights([np.asarray(table)])
    x = model.backbone.get_layer("source_positions")(embedding(tokens))
    for i in range(model.config.encoder.num_layers):
        x = model.backbone.get_layer(f"encoder_block_{i}")(x)
    pooled = keras.layers.GlobalAveragePooling1D()(x)
    logits = model.get_layer("classifier_head")(pooled)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(model(tokens)), atol=1e-5)


def test_keras_file_round_trip_keeps_config_and_outputs(tmp_path):
    model = _model(norm_first=True)
    tokens = _rows(3, [4, 2], 4)
    path = tmp_path / "classifier.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, EncoderClassifier)
    assert (restored.vocab_size, restored.num_classes) == (VOCAB, CLASSES)
    np.testing.assert_allclose(np.asarray(restored(tokens)), np.asarray(model(tokens)), atol=1e-6)


def test_mixed_precision_xla_fit_step_trains_with_float32_logits():
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = _model()
    tokens = _rows(4, [5, 3, 4, 2, 5, 1, 3, 4], 5)
    labels = np.arange(8) % CLASSES
    assert keras.backend.standardize_dtype(model(tokens).dtype) == "float32"
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    history = model.fit(tokens, labels, batch_size=4, epochs=3, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_missing_sizes_are_a_clear_error():
    with pytest.raises(ValueError, match="num_classes"):
        build_classifier("tiny", vocab_size=VOCAB)
    with pytest.raises(ValueError, match="num_classes"):
        build_classifier("tiny", vocab_size=VOCAB, num_classes=0)
