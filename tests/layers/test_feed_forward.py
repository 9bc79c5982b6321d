"""FeedForward: the layer contract (config, shapes, saving, training, mixed precision)."""

import numpy as np

from keras_transformer.layers import FeedForward
from layer_helpers import run_layer_test


def test_feed_forward_keeps_the_layer_contract(tmp_path):
    run_layer_test(
        FeedForward,
        dict(intermediate_dim=24, activation="gelu", dropout=0.1),
        {"inputs": np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")},
        expected_output_shape=(2, 5, 16),
        tmp_path=tmp_path,
    )
