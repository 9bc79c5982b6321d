"""Encoder and decoder blocks: the layer contract (config, shapes, saving, training, mixed precision)."""

import numpy as np

from keras_transformer.layers import DecoderBlock
from keras_transformer.layers import EncoderBlock
from layer_helpers import run_layer_test


def _floats(seed, shape):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _padding(lengths, total):
    return np.arange(total)[None, :] < np.asarray(lengths)[:, None]


def test_encoder_block_keeps_the_layer_contract(tmp_path):
    run_layer_test(
        EncoderBlock,
        dict(num_heads=2, inner_dim=32, dropout=0.1, norm_first=True, normalize="relu"),
        {"inputs": _floats(0, (2, 5, 16)), "padding_mask": _padding([5, 3], 5)},
        expected_output_shape=((2, 5, 16), (2, 2, 5, 5)),
        call_kwargs=dict(return_attention_scores=True),
        tmp_path=tmp_path,
    )


def test_decoder_block_keeps_the_layer_contract(tmp_path):
    run_layer_test(
        DecoderBlock,
        dict(num_heads=2, inner_dim=32, window=2, activation_dropout=0.2),
        {
            "inputs": _floats(1, (2, 5, 16)),
            "encoder_outputs": _floats(2, (2, 7, 16)),
            "decoder_padding_mask": _padding([5, 4], 5),
            "encoder_padding_mask": _padding([7, 2], 7),
        },
        expected_output_shape=((2, 5, 16), ((2, 2, 5, 5), (2, 2, 5, 7))),
        call_kwargs=dict(return_attention_scores=True),
        tmp_path=tmp_path,
    )
