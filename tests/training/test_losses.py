"""The loss averages label-smoothed cross-entropy over real tokens; padding counts for nothing."""

import numpy as np
import pytest
from graph_ops import logit_readers

from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.losses import MaskedTokenAccuracy


def _numpy_loss(labels, logits, epsilon):
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    vocab = logits.shape[-1]
    target = (1 - epsilon) * np.eye(vocab)[labels] + epsilon / vocab
    per_token = -(target * log_probs).sum(-1)
    mask = labels != 0
    return (per_token * mask).sum() / mask.sum()


@pytest.fixture
def batch():
    rng = np.random.default_rng(0)
    labels = np.array([[5, 7, 3, 0, 0], [4, 3, 0, 0, 0], [6, 9, 8, 9, 3]], "int32")
    logits = rng.normal(size=(3, 5, 11)).astype("float32") * 3
    return labels, logits


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_loss_equals_numpy_formula_of_label_smoothing(batch, epsilon):
    labels, logits = batch
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=epsilon)
    np.testing.assert_allclose(float(loss(labels, logits)), _numpy_loss(labels, logits, epsilon), rtol=1e-5)


def test_label_smoothing_changes_the_loss(batch):
    labels, logits = batch
    plain = float(MaskedSparseCategoricalCrossentropy(label_smoothing=0.0)(labels, logits))
    smoothed = float(MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)(labels, logits))
    assert abs(plain - smoothed) > 1e-3


def test_padding_logits_do_not_change_loss_or_accuracy(batch):
    labels, logits = batch
    noisy = logits.copy()
    noisy[labels == 0] = np.random.default_rng(1).normal(size=noisy[labels == 0].shape) * 50
    loss = MaskedSparseCategoricalCrossentropy()
    np.testing.assert_allclose(float(loss(labels, logits)), float(loss(labels, noisy)), rtol=1e-6)
    accuracies = []
    for values in (logits, noisy):
        metric = MaskedTokenAccuracy()
        metric.update_state(labels, values)
        accuracies.append(float(metric.result()))
    assert accuracies[0] == accuracies[1]


def test_loss_is_a_mean_over_real_tokens_not_rows(batch):
    labels, logits = batch
    loss = MaskedSparseCategoricalCrossentropy()
    # Adding an all-padding row must not dilute the mean.
    padded_labels = np.concatenate([labels, np.zeros((1, 5), "int32")])
    padded_logits = np.concatenate([logits, np.zeros((1, 5, 11), "float32")])
    np.testing.assert_allclose(
        float(loss(labels, logits)), float(loss(padded_labels, padded_logits)), rtol=1e-6
    )


def test_accuracy_counts_only_real_tokens():
    labels = np.array([[4, 5, 0, 0]], "int32")
    logits = np.eye(8, dtype="float32")[[[4, 6, 0, 0]]]  # right, wrong, pad, pad
    metric = MaskedTokenAccuracy()
    metric.update_state(labels, logits)
    assert float(metric.result()) == pytest.approx(0.5)


def test_loss_and_metric_survive_serialization():
    import keras

    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.2)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(restored, MaskedSparseCategoricalCrossentropy)
    assert restored.label_smoothing == 0.2
    metric = keras.metrics.deserialize(keras.metrics.serialize(MaskedTokenAccuracy()))
    assert isinstance(metric, MaskedTokenAccuracy)


def test_accuracy_reads_the_logits_once_with_one_arg_max():
    # The logits are the largest tensor of a training step, (B, T, V): the metric that
    # runs every step may touch them only through a single ArgMax, not through the
    # extra elementwise passes of `keras.ops.argmax` (its -0.0 rewrite).
    assert logit_readers(MaskedTokenAccuracy()) == ["ArgMax"]
