import numpy as np
import keras
import pytest

from keras_transformer.layers import MultiHeadSelfAttention
from layer_helpers import run_layer_test
from reference_decoding import attend_with_cache


def _padding(lengths, total):
    return np.arange(total)[None, :] < np.asarray(lengths)[:, None]


def test_attention_keeps_the_layer_contract(tmp_path):
    run_layer_test(
        MultiHeadSelfAttention,
        dict(num_heads=2, causal=True, window=3, dropout=0.1),
        {
            "query": np.random.default_rng(5).normal(size=(2, 5, 16)).astype("float32"),
            "query_padding_mask": _padding([5, 3], 5),
        },
        expected_output_shape=((2, 5, 16), (2, 2, 5, 5)),
        call_kwargs=dict(return_attention_scores=True),
        tmp_path=tmp_path,
    )


def test_cross_attention_output_spec_follows_the_context():
    layer = MultiHeadSelfAttention(num_heads=2)
    query, context = keras.KerasTensor((2, 5, 16)), keras.KerasTensor((2, 7, 24))
    outputs, weights = layer(query, context=context, return_attention_scores=True)
    assert (outputs.shape, weights.shape) == ((2, 5, 16), (2, 2, 5, 7))


def _copy_into_keras(layer, query, context=None):
    reference = keras.layers.MultiHeadAttention(
        num_heads=layer.num_heads, key_dim=layer.head_dim
    )
    context = query if context is None else context
    reference(query, context)
    reference.set_weights(layer.get_weights())
    return reference


@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_matches_keras_multi_head_attention(causal):
    rng = np.random.default_rng(0)
    query = rng.normal(size=(3, 9, 32)).astype("float32")
    mask = _padding([9, 6, 2], 9)
    layer = MultiHeadSelfAttention(num_heads=4, causal=causal)
    ours = layer(query, query_padding_mask=mask)
    reference = _copy_into_keras(layer, query)
    expected = reference(
        query, query, query_mask=mask, value_mask=mask, use_causal_mask=causal
    )
    # Padded query positions are never read; compare the real ones.
    np.testing.assert_allclose(np.asarray(ours)[mask], np.asarray(expected)[mask], atol=1e-5)


def test_cross_attention_matches_keras_multi_head_attention():
    rng = np.random.default_rng(1)
    query = rng.normal(size=(2, 5, 32)).astype("float32")
    context = rng.normal(size=(2, 8, 24)).astype("float32")
    query_mask = _padding([5, 3], 5)
    context_mask = _padding([8, 4], 8)
    layer = MultiHeadSelfAttention(num_heads=4)
    ours, weights = layer(
        query,
        context=context,
        query_padding_mask=query_mask,
        context_padding_mask=context_mask,
        return_attention_scores=True,
    )
    reference = _copy_into_keras(layer, query, context)
    expected, expected_weights = reference(
        query,
        context,
        query_mask=query_mask,
        value_mask=context_mask,
        return_attention_scores=True,
    )
    real = query_mask
    np.testing.assert_allclose(np.asarray(ours)[real], np.asarray(expected)[real], atol=1e-5)
    ours_w = np.transpose(np.asarray(weights), (0, 2, 1, 3))[real]
    expected_w = np.transpose(np.asarray(expected_weights), (0, 2, 1, 3))[real]
    np.testing.assert_allclose(ours_w, expected_w, atol=1e-5)
    # Padded context positions get no weight from real queries.
    assert np.all(np.asarray(weights)[1, :, :3, 4:] == 0)


def test_the_references_cached_steps_equal_one_full_causal_pass():
    rng = np.random.default_rng(2)
    query = rng.normal(size=(2, 6, 16)).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=2, causal=True)
    full = np.asarray(layer(query))
    cache = np.zeros((2, 2, 2, 10, 8), "float32")
    steps = []
    for index in range(6):
        output, _, cache = attend_with_cache(layer, query[:, index : index + 1], cache, index)
        steps.append(np.asarray(output))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_the_references_read_only_cache_equals_cross_attention_on_context():
    rng = np.random.default_rng(3)
    query = rng.normal(size=(2, 4, 16)).astype("float32")
    context = rng.normal(size=(2, 7, 16)).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=2)
    expected = layer(query, context=context)
    cache = layer.compute_key_value(context)
    output, _, returned_cache = attend_with_cache(layer, query, cache)
    np.testing.assert_allclose(output, expected, atol=1e-5)
    np.testing.assert_array_equal(returned_cache, cache)


def test_attention_weights_are_a_distribution_over_real_keys():
    rng = np.random.default_rng(4)
    query = rng.normal(size=(2, 5, 16)).astype("float32")
    mask = _padding([5, 3], 5)
    layer = MultiHeadSelfAttention(num_heads=2, causal=True)
    _, weights = layer(query, query_padding_mask=mask, return_attention_scores=True)
    weights = np.asarray(weights)
    assert weights.shape == (2, 2, 5, 5)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(weights[0, 0], k=1) == 0)  # no weight on the future
    assert np.all(weights[1, :, :3, 3:] == 0)  # no weight on padding


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_heads=0), "num_heads"),
        (dict(num_heads=-2), "num_heads"),
        (dict(num_heads=2, dropout=1.5), "dropout"),
        (dict(num_heads=2, window=0), "window"),
        (dict(num_heads=2, attention_activation="sigmoid"), "attention_activation"),
    ],
)
def test_bad_constructor_arguments_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadSelfAttention(**kwargs)


def test_d_model_not_divisible_by_heads_is_rejected_at_build():
    layer = MultiHeadSelfAttention(num_heads=3)
    with pytest.raises(ValueError, match=r"d_model.*divisible.*num_heads.*d_model=32.*num_heads=3"):
        layer(np.zeros((1, 4, 32), "float32"))


def test_wrong_rank_and_dtype_are_rejected():
    with pytest.raises(ValueError, match="rank 3"):
        MultiHeadSelfAttention(num_heads=2)(np.zeros((4, 32), "float32"))
    with pytest.raises(ValueError, match="floating-point"):
        MultiHeadSelfAttention(num_heads=2)(np.zeros((1, 4, 32), "int32"))
