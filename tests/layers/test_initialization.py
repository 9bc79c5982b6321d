"""Every kernel starts from its own random values; seeded builds repeat exactly."""

import itertools

import keras
import numpy as np
import pytest

from keras_transformer import DecoderBlock
from keras_transformer import EncoderBlock
from keras_transformer import MultiHeadSelfAttention
from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.models import build_transformer


def _kernels(layer):
    """{path below the layer: flat values} of every kernel and embedding table.

    Biases are left out: they all start at zero.
    """
    return {
        weight.path.split("/", 1)[-1]: np.ravel(keras.ops.convert_to_numpy(weight))
        for weight in layer.weights
        if weight.path.endswith(("kernel", "embeddings"))
    }


def _equal_pairs(kernels):
    """Pairs of same-sized kernels whose values coincide (also when reshaped)."""
    return [
        (a, b)
        for (a, x), (b, y) in itertools.combinations(kernels.items(), 2)
        if x.shape == y.shape and np.allclose(x, y)
    ]


def _built_decoder_block(**kwargs):
    block = DecoderBlock(num_heads=2, intermediate_dim=32, **kwargs)
    block.build((2, 5, 16), (2, 7, 16))
    return block


def test_query_key_value_and_output_kernels_start_apart():
    layer = MultiHeadSelfAttention(num_heads=2)
    layer.build((2, 5, 16))
    assert len(_kernels(layer)) == 4
    assert _equal_pairs(_kernels(layer)) == []


@pytest.mark.parametrize("block_class", [EncoderBlock, DecoderBlock])
def test_no_two_kernels_of_a_block_start_equal(block_class):
    if block_class is DecoderBlock:
        block = _built_decoder_block()
    else:
        block = EncoderBlock(num_heads=2, intermediate_dim=16)
        block.build((2, 5, 16))
    kernels = _kernels(block)
    # Self-attention (4) [+ cross-attention (4)] + two feed-forward kernels, the
    # latter the same size as each other.
    assert len(kernels) == (10 if block_class is DecoderBlock else 6)
    assert _equal_pairs(kernels) == []


def test_no_two_kernels_of_a_model_start_equal():
    model = build_transformer("tiny", source_vocab_size=40, target_vocab_size=40)
    assert _equal_pairs(_kernels(model)) == []


def test_builds_after_the_same_seed_are_equal():
    keras.utils.set_random_seed(7)
    first = _kernels(_built_decoder_block())
    keras.utils.set_random_seed(7)
    second = _kernels(_built_decoder_block())
    assert list(first) != [] and first.keys() == second.keys()
    for path in first:
        np.testing.assert_array_equal(first[path], second[path])


def test_builds_without_a_seed_differ():
    first = _kernels(_built_decoder_block())
    second = _kernels(_built_decoder_block())
    assert all(not np.allclose(first[path], second[path]) for path in first)


def test_an_explicitly_seeded_initializer_gives_repeatable_distinct_kernels():
    def build():
        keras.utils.set_random_seed(np.random.randint(1 << 30))  # a seed of its own
        return _kernels(
            _built_decoder_block(kernel_initializer=keras.initializers.GlorotUniform(seed=3))
        )

    first, second = build(), build()
    assert _equal_pairs(first) == []
    for path in first:
        np.testing.assert_array_equal(first[path], second[path])


def test_clone_keeps_the_initializer_kind_and_scale():
    base = keras.initializers.RandomNormal(stddev=0.02, seed=5)
    clone = clone_initializer(base, "query")
    assert isinstance(clone, keras.initializers.RandomNormal)
    assert clone.get_config()["stddev"] == 0.02
    assert clone.get_config()["seed"] != 5
    assert clone_initializer(base, "query").get_config() == clone.get_config()
    assert clone_initializer("zeros", "bias").get_config() == {}
