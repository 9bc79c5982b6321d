"""`--weight-decay`: AdamW decay of kernels and embeddings only, from the run's settings."""

import keras
import numpy as np
import pytest

from keras_transformer.models import build_transformer
from keras_transformer.training.config import TrainingConfig
from keras_transformer.training.trainer import compile_model
from keras_transformer.training.trainer import train
from training_helpers import FAST


def _step_with_zero_gradients(weight_decay):
    """Weights before and after one optimizer step whose gradients are all zero.

    Adam's own update is then zero, so whatever changes is the weight decay.
    """
    model = build_transformer("tiny", source_vocab_size=20, target_vocab_size=20)
    compile_model(model, warmup_steps=5, weight_decay=weight_decay)
    variables = model.trainable_variables
    before = [np.array(variable) for variable in variables]
    rate = float(model.optimizer.learning_rate)  # the rate of the first step
    model.optimizer.apply([keras.ops.zeros_like(variable) for variable in variables], variables)
    return variables, before, [np.array(variable) for variable in variables], rate


def test_kernels_and_embeddings_shrink_by_rate_times_decay_and_the_rest_is_exempt():
    variables, before, after, rate = _step_with_zero_gradients(weight_decay=0.5)
    names = [variable.path.split("/")[-1] for variable in variables]
    assert set(names) == {"kernel", "embeddings", "bias", "gamma", "beta"}
    for name, old, new in zip(names, before, after):
        if name in ("kernel", "embeddings"):
            np.testing.assert_allclose(new, old * (1 - rate * 0.5), rtol=1e-6)
        else:  # biases and the LayerNorm scales (gamma starts at 1) and offsets
            np.testing.assert_array_equal(new, old)


def test_no_weight_decay_leaves_every_weight_unchanged_by_a_zero_gradient():
    _, before, after, _ = _step_with_zero_gradients(weight_decay=0.0)
    for old, new in zip(before, after):
        np.testing.assert_array_equal(new, old)


def test_train_gives_the_optimizer_the_run_settings_weight_decay(fresh_run):
    seen = {}

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen["weight_decay"] = self.model.optimizer.get_config()["weight_decay"]

    config = TrainingConfig(max_steps=1, weight_decay=0.125, **FAST)
    train(str(fresh_run), config, verbose=0, callbacks=[Probe()])
    assert seen["weight_decay"] == pytest.approx(0.125)
