"""The one decoding loop with its strategies and samplers, used directly: sampling a
translation, and the prompt rule of `GreedySearch`."""

import keras
import numpy as np

from keras_transformer import build_language_model
from keras_transformer.constants import BOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding import BeamSearch
from keras_transformer.decoding import Generator
from keras_transformer.decoding import GreedySearch
from keras_transformer.decoding import RandomSampler
from keras_transformer.decoding import SequenceSearch
from keras_transformer.models import build_transformer

VOCAB = 20
NEVER = 10**6  # an end token outside the vocabulary: rows run to their limit
SOURCE = np.array([[5, 6, 7, 8, 9], [4, 11, 0, 0, 0], [12, 13, 14, 0, 0]], "int32")


def _search():
    keras.utils.set_random_seed(2)
    model = build_transformer("tiny", source_vocab_size=VOCAB, target_vocab_size=VOCAB)
    return SequenceSearch(model, max_length=8, eos_id=NEVER)


def _sampler(temperature, seeds):
    rows = len(seeds)
    return RandomSampler([temperature] * rows, [0] * rows, [1.0] * rows, seeds)


def test_a_strategy_run_directly_gives_the_compiled_searches_results():
    search = _search()
    greedy = search.greedy(SOURCE, max_new_tokens=6)
    # A sampler at temperature 0 takes the most probable token: greedy search.
    zero = search.run(GreedySearch(_sampler(0.0, [1, 2, 3]), eos_id=NEVER), SOURCE, 6)
    np.testing.assert_array_equal(zero["tokens"], greedy["tokens"])
    np.testing.assert_allclose(zero["scores"], greedy["scores"], atol=1e-5)
    beam = search.beam_search(SOURCE, max_new_tokens=6)
    direct = search.run(BeamSearch(search.beam_width, search.alpha, search.coverage, NEVER),
                        SOURCE, 6)
    np.testing.assert_array_equal(direct["tokens"], beam["tokens"])


def test_a_sampled_translation_follows_its_seed_and_never_chooses_padding_or_bos():
    search = _search()
    hot = [search.run(GreedySearch(_sampler(3.0, [seed] * 3), eos_id=NEVER), SOURCE, 6)
           for seed in (4, 4, 5)]
    tokens = [np.asarray(result["tokens"]) for result in hot]
    np.testing.assert_array_equal(tokens[0], tokens[1])
    assert not np.array_equal(tokens[0], tokens[2])  # another seed, other draws
    assert tokens[0].shape == (3, 6)
    assert not np.isin(tokens[0], [PAD_ID, BOS_ID]).any()


def test_an_end_token_inside_a_prompt_does_not_end_its_row():
    keras.utils.set_random_seed(3)
    model = build_language_model("tiny", vocab_size=VOCAB)
    prompts = np.array([[BOS_ID, 5, 6, 7], [BOS_ID, 9, 0, 0]], "int32")
    free = Generator(model, eos_id=NEVER).generate(prompts, max_new_tokens=6)
    # 6 ends a row only when generated: row 0's prompt holds one.
    stopping = Generator(model, eos_id=6).generate(prompts, max_new_tokens=6)
    for row, (tokens, length) in enumerate(zip(free["tokens"].numpy(), free["lengths"].numpy())):
        expected = list(tokens[:length])
        if 6 in expected:
            expected = expected[: expected.index(6)]
        got = stopping["tokens"].numpy()[row][: stopping["lengths"].numpy()[row]]
        assert list(got) == expected
    assert stopping["lengths"].numpy()[0] > 0
