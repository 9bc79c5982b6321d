"""The language model's perplexity metric and the classifier's loss and macro-F1."""

import keras
import numpy as np
import pytest

from keras_transformer.evaluation.classification import classification_scores
from keras_transformer.training.losses import ClassificationCrossEntropy
from keras_transformer.training.losses import MacroF1
from keras_transformer.training.losses import MaskedPerplexity


def test_perplexity_of_uniform_logits_is_the_vocabulary_size():
    metric = MaskedPerplexity()
    metric.update_state(np.array([[4, 7, 0, 0]]), np.zeros((1, 4, 8), "float32"))
    assert float(metric.result()) == pytest.approx(8.0)


def test_perplexity_ignores_padding_and_pools_tokens_over_batches():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 5)).astype("float32")
    labels = np.array([[1, 2, 0], [3, 0, 0]])
    metric = MaskedPerplexity()
    metric.update_state(labels[:1], logits[:1])
    metric.update_state(labels[1:], logits[1:])
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    real = [(0, 0, 1), (0, 1, 2), (1, 0, 3)]
    expected = np.exp(-np.mean([log_probs[b, t, y] for b, t, y in real]))
    assert float(metric.result()) == pytest.approx(expected, rel=1e-5)
    # What the padded positions predict changes nothing.
    changed = logits.copy()
    changed[0, 2] = 100.0
    again = MaskedPerplexity()
    again.update_state(labels, changed)
    assert float(again.result()) == pytest.approx(expected, rel=1e-5)


def test_classification_loss_without_smoothing_is_sparse_cross_entropy():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(6, 3)).astype("float32")
    labels = np.array([0, 2, 1, 1, 0, 2])
    expected = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
    assert float(ClassificationCrossEntropy(label_smoothing=0.0)(labels, logits)) == pytest.approx(
        float(expected), rel=1e-5)
    assert float(ClassificationCrossEntropy(label_smoothing=0.1)(labels, logits)) != pytest.approx(
        float(expected), rel=1e-3)


def test_macro_f1_metric_equals_the_evaluation_score():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(40, 3)).astype("float32")
    labels = rng.integers(0, 3, size=40)
    metric = MacroF1(3)
    metric.update_state(labels[:25], logits[:25])
    metric.update_state(labels[25:], logits[25:])
    expected = classification_scores(labels, logits.argmax(-1), ["a", "b", "c"])["macro_f1"]
    assert float(metric.result()) == pytest.approx(expected, rel=1e-5)


def test_macro_f1_round_trips_its_config():
    metric = keras.metrics.deserialize(keras.metrics.serialize(MacroF1(4)))
    assert isinstance(metric, MacroF1) and metric.num_classes == 4 and metric.name == "macro_f1"
