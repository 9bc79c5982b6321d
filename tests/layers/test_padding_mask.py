"""PaddingMask: True for real tokens, and the layer contract."""

import numpy as np
import pytest

from keras_transformer.layers import PaddingMask
from layer_helpers import run_layer_test

TOKENS = np.array([[5, 6, 7, 0, 0], [9, 0, 0, 0, 0]], "int32")


def test_padding_mask_keeps_the_layer_contract(tmp_path):
    run_layer_test(PaddingMask, {}, {"token_ids": TOKENS}, expected_output_shape=(2, 5),
                   tmp_path=tmp_path)


def test_mask_is_true_exactly_where_tokens_are_not_padding():
    np.testing.assert_array_equal(PaddingMask()(TOKENS), TOKENS != 0)
    np.testing.assert_array_equal(PaddingMask(pad_id=9)(TOKENS), TOKENS != 9)


def test_float_token_ids_are_rejected():
    with pytest.raises(ValueError, match="integer"):
        PaddingMask()(TOKENS.astype("float32"))
