"""Encoder and decoder blocks: the layer contract (config, shapes, saving, training, mixed precision)."""

import keras
import numpy as np
import pytest

from keras_transformer.layers import DecoderBlock
from keras_transformer.layers import EncoderBlock
from layer_helpers import run_layer_test
from reference_decoding import block_with_cache


def _floats(seed, shape):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _padding(lengths, total):
    return np.arange(total)[None, :] < np.asarray(lengths)[:, None]


def test_encoder_block_keeps_the_layer_contract(tmp_path):
    run_layer_test(
        EncoderBlock,
        dict(num_heads=2, intermediate_dim=32, dropout=0.1, norm_first=True, attention_activation="relu"),
        {"inputs": _floats(0, (2, 5, 16)), "padding_mask": _padding([5, 3], 5)},
        expected_output_shape=((2, 5, 16), (2, 2, 5, 5)),
        call_kwargs=dict(return_attention_scores=True),
        tmp_path=tmp_path,
    )


def test_decoder_block_keeps_the_layer_contract(tmp_path):
    run_layer_test(
        DecoderBlock,
        dict(num_heads=2, intermediate_dim=32, window=2, activation_dropout=0.2),
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


def test_decoder_only_block_keeps_the_layer_contract(tmp_path):
    # The training step inside also proves every weight is used: no idle cross-attention.
    run_layer_test(
        DecoderBlock,
        dict(num_heads=2, intermediate_dim=32, cross_attention=False, norm_first=True),
        {"inputs": _floats(3, (2, 5, 16)), "decoder_padding_mask": _padding([5, 3], 5)},
        expected_output_shape=((2, 5, 16), (2, 2, 5, 5)),
        call_kwargs=dict(return_attention_scores=True),
        tmp_path=tmp_path,
    )


def test_decoder_only_block_has_no_cross_attention_and_refuses_encoder_inputs():
    block = DecoderBlock(num_heads=2, intermediate_dim=32, cross_attention=False)
    block(_floats(4, (1, 3, 16)))
    assert not [w.path for w in block.weights if "cross" in w.path]
    assert block.get_config()["cross_attention"] is False
    with pytest.raises(ValueError, match="cross_attention=False"):
        block(_floats(4, (1, 3, 16)), _floats(5, (1, 2, 16)))


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_references_decoder_only_block_steps_equal_the_full_pass(norm_first):
    block = DecoderBlock(num_heads=2, intermediate_dim=32, cross_attention=False, norm_first=norm_first)
    inputs = _floats(6, (2, 5, 16))
    full = np.asarray(block(inputs))
    cache = keras.ops.zeros((2, 2, 2, 5, 8))
    for index in range(5):
        step, cache = block_with_cache(block, inputs[:, index : index + 1], cache, index)
        np.testing.assert_allclose(np.asarray(step)[:, 0], full[:, index], atol=1e-5)


def _masked_embeddings(tokens):
    embedding = keras.layers.Embedding(20, 16, mask_zero=True)
    return embedding(tokens)


@pytest.mark.parametrize(
    "make_block, explicit",
    [
        (lambda: EncoderBlock(num_heads=2, intermediate_dim=32), "padding_mask"),
        (lambda: DecoderBlock(num_heads=2, intermediate_dim=32, cross_attention=False),
         "decoder_padding_mask"),
    ],
)
def test_blocks_honour_the_keras_mask_of_their_input(make_block, explicit):
    # Left padding, so that even the causal block sees padded keys at real positions.
    tokens = np.array([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]], "int32")
    embedded = _masked_embeddings(tokens)
    block = make_block()
    with_keras_mask = np.asarray(block(embedded))
    with_explicit_mask = np.asarray(block(embedded, **{explicit: tokens != 0}))
    unmasked = np.asarray(block(keras.ops.convert_to_tensor(np.asarray(embedded))))
    np.testing.assert_allclose(with_keras_mask, with_explicit_mask, atol=1e-6)
    # The mask matters at row 0's real positions, so the equality above means something.
    assert np.abs(unmasked[0, 2:] - with_explicit_mask[0, 2:]).max() > 1e-3


def test_the_keras_mask_flows_through_a_stack_of_blocks():
    tokens = np.array([[5, 6, 0, 0], [5, 6, 7, 8]], "int32")
    inputs = keras.Input((None,), dtype="int32")
    embedding = keras.layers.Embedding(20, 16, mask_zero=True)
    first, second = EncoderBlock(2, 32), EncoderBlock(2, 32)
    masked = keras.Model(inputs, second(first(embedding(inputs))))
    mask = tokens != 0
    explicit = second(first(embedding(tokens), padding_mask=mask), padding_mask=mask)
    np.testing.assert_allclose(np.asarray(masked(tokens)), np.asarray(explicit), atol=1e-6)
