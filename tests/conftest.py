"""Test set-up: TensorFlow backend, quiet logs, a clean dtype policy per test."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _reset_keras_state():
    keras.utils.set_random_seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)
