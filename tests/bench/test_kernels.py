"""The kernels `python -m bench kernels` compares compute the same numbers, so that
only their speed differs."""

import numpy as np

from bench import kernels
from keras_transformer.ops.attention import scaled_dot_product_attention


def test_attention_candidates_equal_the_full_formula_for_one_query():
    rng = np.random.default_rng(0)
    batch, heads, length, depth = 3, 2, 7, 8
    query = rng.normal(size=(batch, heads, 1, depth)).astype("float32")
    keys = rng.normal(size=(batch, heads, length, depth)).astype("float32")
    values = rng.normal(size=(batch, heads, length, depth)).astype("float32")
    visible = np.arange(length)[None, :] < np.array([7, 4, 1])[:, None]  # (B, L)
    expected, _ = scaled_dot_product_attention(query, keys, values, mask=visible[:, None, :])
    scaled = query / np.sqrt(depth)  # a step's queries come scaled
    for kernel in (kernels.attend_as_the_step_does, kernels.attend_by_batched_matmuls,
                   kernels.attend_with_spelled_out_softmax):
        outputs = kernel(scaled, keys, values, visible[:, None, None, :])
        np.testing.assert_allclose(np.asarray(outputs), np.asarray(expected), atol=1e-5,
                                   err_msg=kernel.__name__)
