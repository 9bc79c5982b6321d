"""Under XLA each input width is a compilation: searches pad inputs to a few widths."""

from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding import Generator
from keras_transformer.decoding import SequenceSearch
from keras_transformer.decoding import search as search_module
from keras_transformer.decoding.loop import FIRST_STATIC_WIDTH
from keras_transformer.decoding.loop import pad_to_static_width
from keras_transformer.decoding.loop import static_widths
from keras_transformer.models import build_language_model
from keras_transformer.models import build_transformer

NEVER = 10**6  # an end token outside the vocabulary: rows run to their limit


@pytest.mark.parametrize("cap", [1, 5, 8, 9, 64, 100])
def test_static_widths_double_from_the_first_and_end_at_the_cap(cap):
    widths = static_widths(cap)
    assert widths[-1] == cap
    assert widths == sorted(set(widths))
    assert all(width == FIRST_STATIC_WIDTH * 2**i for i, width in enumerate(widths[:-1]))
    assert len(widths) <= max(0, int(np.log2(cap / FIRST_STATIC_WIDTH))) + 2


@pytest.mark.parametrize("width", [1, 7, 8, 9, 17, 33, 64, 70])
def test_padding_keeps_the_ids_and_reaches_the_first_static_width_that_fits(width):
    tokens = np.random.default_rng(width).integers(1, 50, size=(3, width)).astype("int32")
    padded = pad_to_static_width(tf.constant(tokens), cap=64).numpy()
    expected_width = min([w for w in static_widths(64) if w >= width], default=width)
    assert padded.shape == (3, expected_width)
    np.testing.assert_array_equal(padded[:, :width], tokens)
    assert (padded[:, width:] == PAD_ID).all()


def _sources(rng, lengths, vocab):
    tokens = np.zeros((len(lengths), max(lengths)), "int32")
    for row, length in enumerate(lengths):
        tokens[row, :length] = rng.integers(4, vocab, size=length)
    return tokens


@pytest.mark.parametrize("lengths", [[3, 2], [9, 5], [17, 4, 12]])
def test_an_xla_search_pads_sources_and_finds_what_graph_mode_finds(lengths):
    keras.utils.set_random_seed(2)
    model = build_transformer("tiny", source_vocab_size=30, target_vocab_size=30)
    source = _sources(np.random.default_rng(len(lengths)), lengths, 30)
    plain = SequenceSearch(model, max_length=9, beam_width=3, eos_id=NEVER)
    with mock.patch.object(search_module, "pad_to_static_width",
                           wraps=search_module.pad_to_static_width) as padding:
        compiled = SequenceSearch(model, max_length=9, beam_width=3, eos_id=NEVER,
                                  jit_compile=True)
        for method in ("greedy", "beam_search"):
            expected, result = getattr(plain, method)(source), getattr(compiled, method)(source)
            np.testing.assert_array_equal(result["tokens"], expected["tokens"])
            np.testing.assert_allclose(result["scores"], expected["scores"], atol=1e-4)
    # Once per traced search, with the model's position table as the cap.
    assert padding.call_count == 2
    assert all(call.args[1] == model.config.max_length for call in padding.call_args_list)
    plain.greedy(source)  # graph mode pads nothing
    assert padding.call_count == 2


def test_xla_generation_pads_prompts_and_continues_them_as_graph_mode():
    keras.utils.set_random_seed(4)
    model = build_language_model("tiny", vocab_size=30)
    prompts = np.zeros((2, 11), "int32")
    prompts[0, :11] = [BOS_ID, *range(4, 14)]  # 11 columns: padded to 16 under XLA
    prompts[1, :3] = [BOS_ID, 7, 8]
    plain = Generator(model, max_length=24, eos_id=NEVER)
    compiled = Generator(model, max_length=24, eos_id=NEVER, jit_compile=True)
    expected = plain.generate(prompts, max_new_tokens=[6, 9])
    result = compiled.generate(prompts, max_new_tokens=[6, 9])
    np.testing.assert_array_equal(result["tokens"], expected["tokens"])
    np.testing.assert_array_equal(result["lengths"], [6, 9])
