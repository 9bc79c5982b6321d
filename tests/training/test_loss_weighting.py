"""`--loss-weighting`: the loss's value is the mean either way; its gradient weighs
each batch the same ("batch") or each real token the same ("token")."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.runs.folder import RunFolder
from keras_transformer.training.config import TrainingConfig
from keras_transformer.training.losses import ClassificationCrossEntropy
from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.tasks.loading import task_for

DENOMINATOR = 64.0


def _value_and_gradient(loss, labels, logits):
    logits = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = loss(labels, logits)
    return float(value), tape.gradient(value, logits).numpy()


def _sequence_batches():
    """Two batches of the same sentence: one alone (2 real tokens), one beside a longer one (7)."""
    rng = np.random.default_rng(0)
    sentence = rng.normal(size=(5, 11)).astype("float32")
    other = rng.normal(size=(5, 11)).astype("float32")
    short = (np.array([[4, 3, 0, 0, 0]], "int32"), sentence[None])
    full = (np.array([[4, 3, 0, 0, 0], [6, 9, 8, 9, 3]], "int32"), np.stack([sentence, other]))
    return short, full


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_token_weighting_keeps_the_mean_and_scales_its_gradient_to_the_fixed_denominator(smoothing):
    short, full = _sequence_batches()
    for labels, logits in (short, full):
        real_tokens = int((labels != 0).sum())
        mean, mean_gradient = _value_and_gradient(
            MaskedSparseCategoricalCrossentropy(smoothing), labels, logits)
        value, gradient = _value_and_gradient(
            MaskedSparseCategoricalCrossentropy(smoothing, gradient_denominator=DENOMINATOR),
            labels, logits)
        assert value == pytest.approx(mean, rel=1e-6)
        np.testing.assert_allclose(gradient, mean_gradient * real_tokens / DENOMINATOR, rtol=1e-5,
                                   atol=1e-9)


def test_a_token_weighs_the_same_in_any_batch_only_with_token_weighting():
    short, full = _sequence_batches()

    def first_sentence_gradient(loss, batch):
        return _value_and_gradient(loss, *batch)[1][0]

    by_token = MaskedSparseCategoricalCrossentropy(gradient_denominator=DENOMINATOR)
    np.testing.assert_allclose(first_sentence_gradient(by_token, short),
                               first_sentence_gradient(by_token, full), rtol=1e-5, atol=1e-9)
    by_batch = MaskedSparseCategoricalCrossentropy()
    # The mean divides by 2 real tokens in one batch and 7 in the other.
    np.testing.assert_allclose(first_sentence_gradient(by_batch, short),
                               first_sentence_gradient(by_batch, full) * 7 / 2, rtol=1e-5, atol=1e-9)


def test_classifier_token_weighting_keeps_the_mean_and_weighs_each_example_the_same():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(6, 3)).astype("float32")
    labels = np.array([0, 2, 1, 1, 0, 2])
    mean, mean_gradient = _value_and_gradient(ClassificationCrossEntropy(), labels, logits)
    value, gradient = _value_and_gradient(
        ClassificationCrossEntropy(gradient_denominator=DENOMINATOR), labels, logits)
    assert value == pytest.approx(mean, rel=1e-6)
    np.testing.assert_allclose(gradient, mean_gradient * 6 / DENOMINATOR, rtol=1e-5, atol=1e-9)
    # The first example's gradient alone and among six is the same.
    alone = _value_and_gradient(
        ClassificationCrossEntropy(gradient_denominator=DENOMINATOR), labels[:1], logits[:1])[1]
    np.testing.assert_allclose(alone[0], gradient[0], rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("loss_class", [MaskedSparseCategoricalCrossentropy, ClassificationCrossEntropy])
def test_the_denominator_survives_serialization_and_bad_ones_are_refused(loss_class):
    restored = keras.losses.deserialize(keras.losses.serialize(loss_class(gradient_denominator=4096)))
    assert isinstance(restored, loss_class) and restored.gradient_denominator == 4096
    with pytest.raises(ValueError, match="positive number"):
        loss_class(gradient_denominator=0)


@pytest.mark.parametrize("run_fixture", ["prepared_run", "lm_run", "classify_run"])
def test_every_task_loss_follows_the_training_setting(run_fixture, request):
    run_config = RunFolder(str(request.getfixturevalue(run_fixture))).config
    recipe = task_for(run_config)
    by_batch = TrainingConfig(loss_weighting="batch")
    assert recipe.training_loss(run_config, by_batch).gradient_denominator is None
    by_token = TrainingConfig(loss_weighting="token", token_budget=512)
    assert by_token.gradient_denominator == 512
    assert recipe.training_loss(run_config, by_token).gradient_denominator == 512
    # The default weighs tokens, over the default budget.
    assert recipe.training_loss(run_config, TrainingConfig()).gradient_denominator == TrainingConfig().token_budget


def test_compile_model_default_loss_weighs_as_a_training_run_does():
    from keras_transformer.models import build_transformer
    from keras_transformer.training.trainer import compile_model

    model = build_transformer("tiny", source_vocab_size=20, target_vocab_size=20)
    assert compile_model(model).loss.gradient_denominator == TrainingConfig().gradient_denominator
    assert compile_model(model, loss_weighting="batch").loss.gradient_denominator is None
    assert compile_model(model, token_budget=512).loss.gradient_denominator == 512
