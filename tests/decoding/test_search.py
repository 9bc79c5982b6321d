import numpy as np
import keras
import pytest

from keras_transformer.constants import BOS_ID, EOS_ID
from bench.uncached import make_uncached_greedy
from keras_transformer.decoding import SequenceSearch, score_sequences
from keras_transformer.decoding.strategies import coverage_penalty
from keras_transformer.models import build_transformer

VOCAB = 16


def _random_model(seed):
    keras.utils.set_random_seed(seed)
    return build_transformer("tiny", source_vocab_size=VOCAB, target_vocab_size=VOCAB)


def _sources(seed, lengths, width=None):
    rng = np.random.default_rng(seed)
    width = width or max(lengths)
    tokens = np.zeros((len(lengths), width), "int32")
    for row, length in enumerate(lengths):
        tokens[row, :length] = rng.integers(4, VOCAB, size=length)
    return tokens


@pytest.fixture(scope="module")
def half_trained_model():
    """A tiny model trained briefly to reverse sequences: it emits EOS, but not always
    where it should, so greedy and beam search have real choices to make."""
    keras.utils.set_random_seed(7)
    model = build_transformer("tiny", source_vocab_size=VOCAB, target_vocab_size=VOCAB)
    rng = np.random.default_rng(7)
    count, width = 2000, 6
    source = _sources(7, rng.integers(2, width + 1, size=count), width)
    decoder = np.zeros((count, width + 1), "int32")
    labels = np.zeros((count, width + 1), "int32")
    for row in range(count):
        sequence = source[row][source[row] != 0][::-1]
        decoder[row, : len(sequence) + 1] = [BOS_ID, *sequence]
        labels[row, : len(sequence) + 1] = [*sequence, EOS_ID]
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
    )
    model.fit({"encoder_tokens": source, "decoder_tokens": decoder}, labels,
              batch_size=64, epochs=1, verbose=0)
    return model


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cached_greedy_equals_uncached_greedy_on_random_models(seed):
    model = _random_model(seed)
    source = _sources(seed, [7, 3, 5, 1])
    cached = SequenceSearch(model, max_length=12).greedy(source, max_new_tokens=12)
    uncached = make_uncached_greedy(model, max_length=12)(source)
    np.testing.assert_array_equal(cached["tokens"], uncached)


def test_cached_greedy_equals_uncached_greedy_when_rows_end(half_trained_model):
    source = _sources(11, [6, 2, 4, 5, 3, 1])
    cached = SequenceSearch(half_trained_model, max_length=10).greedy(source, max_new_tokens=10)
    uncached = make_uncached_greedy(half_trained_model, max_length=10)(source)
    assert np.any(np.asarray(cached["lengths"]) < 10)  # some rows really ended
    np.testing.assert_array_equal(cached["tokens"], uncached)


@pytest.mark.parametrize("coverage", [0.0, 0.5])
def test_xla_and_graph_searches_agree(half_trained_model, coverage):
    source = _sources(12, [6, 3, 5])
    plain = SequenceSearch(half_trained_model, max_length=10, beam_width=3, coverage=coverage)
    compiled = SequenceSearch(half_trained_model, max_length=10, beam_width=3, jit_compile=True,
                              coverage=coverage)
    np.testing.assert_array_equal(plain.greedy(source)["tokens"], compiled.greedy(source)["tokens"])
    np.testing.assert_array_equal(
        plain.beam_search(source)["tokens"], compiled.beam_search(source)["tokens"]
    )


def test_growing_and_preallocated_caches_give_the_same_search(half_trained_model):
    source = _sources(14, [6, 3, 5, 1])
    growing = SequenceSearch(half_trained_model, max_length=10, beam_width=3)
    preallocated = SequenceSearch(
        half_trained_model, max_length=10, beam_width=3, growing_cache=False
    )
    assert growing.growing_cache and not preallocated.growing_cache
    for method in ("greedy", "beam_search"):
        grown, fixed = getattr(growing, method)(source), getattr(preallocated, method)(source)
        np.testing.assert_array_equal(grown["tokens"], fixed["tokens"])
        np.testing.assert_allclose(grown["scores"], fixed["scores"], atol=1e-5)
    assert not SequenceSearch(half_trained_model, jit_compile=True).growing_cache
    with pytest.raises(ValueError, match="growing_cache=True.*jit_compile"):
        SequenceSearch(half_trained_model, jit_compile=True, growing_cache=True)


def test_beam_width_one_equals_greedy(half_trained_model):
    source = _sources(13, [6, 2, 4, 5, 3, 1, 6, 6])
    search = SequenceSearch(half_trained_model, max_length=10, beam_width=1, alpha=0.0,
                            coverage=0.0)
    greedy = search.greedy(source)
    beam = search.beam_search(source)
    np.testing.assert_array_equal(beam["tokens"][:, 0], greedy["tokens"])
    np.testing.assert_allclose(beam["scores"][:, 0], greedy["scores"], atol=1e-4)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_hypothesis_never_scores_below_greedy(half_trained_model, alpha):
    source = _sources(14, list(np.random.default_rng(14).integers(1, 7, size=24)), 6)
    search = SequenceSearch(half_trained_model, max_length=10, beam_width=4, alpha=alpha,
                            coverage=0.0)
    greedy = search.greedy(source)
    beam = search.beam_search(source)
    greedy_lengths = np.asarray(greedy["lengths"])
    ended = greedy_lengths < 10  # rows that produced EOS, scored with it
    greedy_scores = np.asarray(
        score_sequences(half_trained_model, source, greedy["tokens"], alpha=alpha)
    )
    beam_scores = np.asarray(
        score_sequences(half_trained_model, source, beam["tokens"][:, 0], alpha=alpha)
    )
    assert ended.sum() >= 12
    beam_ended = np.asarray(beam["lengths"])[:, 0] < 10
    both = ended & beam_ended
    assert np.all(beam_scores[both] >= greedy_scores[both] - 1e-4)
    # The search's own scores agree with teacher-forced scoring of its output.
    np.testing.assert_allclose(np.asarray(beam["scores"])[:, 0][beam_ended], beam_scores[beam_ended], atol=1e-3)


@pytest.mark.parametrize("method, coverage", [
    ("greedy", 0.0), ("beam_search", 0.0),
    ("beam_search", 0.5),  # padding must not count as uncovered source
])
def test_batch_of_different_lengths_equals_each_sentence_alone(half_trained_model, method, coverage):
    lengths = [6, 1, 4, 2, 5]
    source = _sources(15, lengths, width=9)  # extra padding beyond the longest
    search = SequenceSearch(half_trained_model, max_length=16, beam_width=3, extra_length=3,
                            coverage=coverage)
    batched = getattr(search, method)(source)
    for row, length in enumerate(lengths):
        alone = getattr(search, method)(source[row : row + 1, :length])
        produced = np.asarray(alone["tokens"])[0]
        expected = np.asarray(batched["tokens"])[row]
        np.testing.assert_array_equal(produced, expected[..., : produced.shape[-1]])
        assert not np.any(expected[..., produced.shape[-1] :])
        np.testing.assert_array_equal(alone["lengths"][0], batched["lengths"][row])
        np.testing.assert_allclose(alone["scores"][0], batched["scores"][row], atol=1e-4)


def test_coverage_penalty_counts_each_real_source_token_below_full_attention():
    coverage = np.array([[0.5, 2.0, 1.0, 0.1], [0.0, 0.25, 1.0, 1.0]], "float32")
    real = np.array([[True, True, True, False], [True, True, True, True]])
    penalty = np.asarray(coverage_penalty(coverage, real))
    # log(min(c, 1)) per real token; the padding's 0.1 and any excess over 1 are ignored;
    # a token never attended to counts as 1e-6, not minus infinity.
    np.testing.assert_allclose(penalty, [np.log(0.5), np.log(1e-6) + np.log(0.25)], rtol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_scores_with_coverage_equal_teacher_forced_scores(half_trained_model, alpha):
    # Each hypothesis carries its own coverage through the beam's reordering: its score is
    # log P / length penalty + β · coverage penalty of its own attention, recomputed here
    # by a full teacher-forced pass over the hypothesis.
    source = _sources(18, list(np.random.default_rng(18).integers(1, 7, size=16)), 6)
    search = SequenceSearch(half_trained_model, max_length=10, beam_width=3, alpha=alpha,
                            coverage=0.5)
    beam = search.beam_search(source)
    ended = np.asarray(beam["lengths"]) < 10
    assert ended.sum() >= 24
    for rank in range(3):
        tokens = beam["tokens"][:, rank]
        expected = np.asarray(
            score_sequences(half_trained_model, source, tokens, alpha=alpha, coverage=0.5))
        plain = np.asarray(score_sequences(half_trained_model, source, tokens, alpha=alpha))
        rows = ended[:, rank]
        np.testing.assert_allclose(np.asarray(beam["scores"])[rows, rank], expected[rows], atol=1e-3)
        assert np.any(expected[rows] < plain[rows] - 0.01)  # the penalty took part


def test_default_length_limit_is_source_length_plus_extra():
    model = _random_model(3)
    source = _sources(16, [5, 2])
    never = VOCAB + 100  # an end token the model cannot produce: only the limit stops it
    result = SequenceSearch(model, max_length=40, extra_length=4, eos_id=never).greedy(source)
    np.testing.assert_array_equal(result["lengths"], [9, 6])
    capped = SequenceSearch(model, max_length=7, extra_length=4, eos_id=never).greedy(source)
    np.testing.assert_array_equal(capped["lengths"], [7, 6])


def test_decoding_stops_at_the_end_token_and_emits_nothing_after(half_trained_model):
    source = _sources(17, [3, 5, 2, 4])
    search = SequenceSearch(half_trained_model, max_length=12, beam_width=3)
    for result, tokens in (
        (greedy := search.greedy(source), np.asarray(greedy["tokens"])),
        (beam := search.beam_search(source), np.asarray(beam["tokens"])),
    ):
        lengths = np.asarray(result["lengths"])
        positions = np.arange(tokens.shape[-1])
        assert not np.any(tokens == EOS_ID)
        assert np.all(tokens[positions >= lengths[..., None]] == 0)
        assert np.all(tokens[positions < lengths[..., None]] != 0)
    # The loop ends when every row is finished, not at the length limit.
    assert np.asarray(greedy["tokens"]).shape[1] <= 12
    assert np.all(np.asarray(greedy["lengths"]) < 12)


@pytest.mark.parametrize("settings", [
    dict(),  # the default: P = 2 searches, a growing cache
    dict(parallel_searches=1, growing_cache=False),
    dict(jit_compile=True),
])
def test_an_empty_batch_gives_empty_results(half_trained_model, settings):
    # A server may pass on a request of no rows: the search answers it with no rows.
    search = SequenceSearch(half_trained_model, max_length=10, beam_width=3, **settings)
    empty = np.zeros((0, 5), "int32")
    greedy, beam = search.greedy(empty), search.beam_search(empty)
    assert greedy["tokens"].shape == (0, 0)
    assert greedy["lengths"].shape == greedy["scores"].shape == (0,)
    assert beam["tokens"].shape == (0, 3, 0)
    assert beam["lengths"].shape == beam["scores"].shape == (0, 3)
    assert make_uncached_greedy(half_trained_model, max_length=10)(empty).shape == (0, 0)


def test_bad_search_arguments_are_rejected():
    model = _random_model(4)
    with pytest.raises(ValueError, match="beam_width"):
        SequenceSearch(model, beam_width=0)
    with pytest.raises(ValueError, match="alpha"):
        SequenceSearch(model, alpha=-1)
    with pytest.raises(ValueError, match="coverage"):
        SequenceSearch(model, coverage=-0.5)
