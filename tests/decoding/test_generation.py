"""Language-model generation: the cached loop against the uncached reference, the
stateless seeds, and what each sampling filter promises."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import build_language_model
from keras_transformer.constants import BOS_ID
from keras_transformer.constants import UNK_ID
from bench.uncached import UncachedGenerator
from keras_transformer.decoding import Generator
from keras_transformer.decoding.loop import next_token_log_probs

VOCAB = 20
NEVER = 10**6  # an end token outside the vocabulary: rows run to their limit
PROMPTS = np.array([[BOS_ID, 5, 6, 7, 8], [BOS_ID, 9, 0, 0, 0], [BOS_ID, 4, 11, 0, 0]], "int32")


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(3)
    return build_language_model("tiny", vocab_size=VOCAB, norm_first=True)


@pytest.fixture(scope="module")
def generators(model):
    return {
        "cached": Generator(model, eos_id=NEVER),
        "uncached": UncachedGenerator(model, eos_id=NEVER),
    }


def _rows(result):
    return [list(row[:length]) for row, length in
            zip(result["tokens"].numpy(), result["lengths"].numpy())]


def _step_log_probs(model, prompt, new_tokens):
    """(N, V) next-token log-probabilities before each new token, from one full pass."""
    prompt = prompt[prompt != 0]
    sequence = np.concatenate([prompt, new_tokens]).astype("int32")[None]
    logits = model(sequence)[0, len(prompt) - 1 : len(sequence[0]) - 1]
    return next_token_log_probs(logits).numpy()


@pytest.mark.parametrize(
    "settings",
    [
        dict(),
        dict(temperature=1.0, seed=[11, 12, 13]),
        dict(temperature=0.8, top_k=4, top_p=0.9, seed=5),
        dict(temperature=[0.0, 1.3, 0.7], top_k=[0, 3, 0], top_p=[1.0, 1.0, 0.6], seed=[1, 2, 3]),
    ],
)
def test_cached_generation_equals_the_uncached_reference(generators, settings):
    cached = generators["cached"].generate(PROMPTS, max_new_tokens=[6, 9, 4], **settings)
    uncached = generators["uncached"].generate(PROMPTS, max_new_tokens=[6, 9, 4], **settings)
    assert _rows(cached) == _rows(uncached)
    assert cached["lengths"].numpy().tolist() == [6, 9, 4]


def test_xla_generation_equals_the_uncached_reference_when_greedy(model, generators):
    xla = Generator(model, eos_id=NEVER, jit_compile=True)
    expected = generators["uncached"].generate(PROMPTS, max_new_tokens=7)
    assert _rows(xla.generate(PROMPTS, max_new_tokens=7)) == _rows(expected)
    sampled = dict(max_new_tokens=7, temperature=1.0, seed=4)
    assert _rows(xla.generate(PROMPTS, **sampled)) == _rows(xla.generate(PROMPTS, **sampled))


def test_greedy_follows_the_models_argmax(model, generators):
    result = _rows(generators["cached"].generate(PROMPTS, max_new_tokens=5))
    for prompt, tokens in zip(PROMPTS, result):
        log_probs = _step_log_probs(model, prompt, tokens)
        assert tokens == log_probs.argmax(-1).tolist()


def test_the_same_seed_gives_the_same_sample_and_other_seeds_differ(generators):
    generate = generators["cached"].generate
    settings = dict(max_new_tokens=10, temperature=1.0)
    first = _rows(generate(PROMPTS, seed=[7, 8, 9], **settings))
    assert _rows(generate(PROMPTS, seed=[7, 8, 9], **settings)) == first
    others = [_rows(generate(PROMPTS, seed=seed, **settings)) for seed in (100, 200, 300)]
    assert all(other != first for other in others)


def test_a_rows_sample_depends_on_its_seed_not_on_the_batch(generators):
    generate = generators["cached"].generate
    batch = _rows(generate(PROMPTS, max_new_tokens=8, temperature=1.0, seed=[7, 8, 9]))
    alone = _rows(generate(PROMPTS[1:2, :2], max_new_tokens=8, temperature=1.0, seed=8))
    assert alone[0] == batch[1]


def test_top_k_never_emits_a_token_outside_the_k_best(model, generators):
    k = 3
    result = generators["cached"].generate(
        PROMPTS, max_new_tokens=12, temperature=2.0, top_k=k, seed=[1, 2, 3]
    )
    emitted_ranks = []
    for prompt, tokens in zip(PROMPTS, _rows(result)):
        log_probs = _step_log_probs(model, prompt, tokens)
        for step, token in enumerate(tokens):
            # The unknown piece is never generated: it takes no rank.
            rank = int((log_probs[step] > log_probs[step, token]).sum()
                       - (log_probs[step, UNK_ID] > log_probs[step, token]))
            assert rank < k, f"token {token} at step {step} is number {rank + 1}"
            emitted_ranks.append(rank)
    assert max(emitted_ranks) > 0  # it samples, not just greedy


def test_top_p_emits_only_tokens_of_the_nucleus(model, generators):
    top_p, temperature = 0.5, 1.5
    result = generators["cached"].generate(
        PROMPTS, max_new_tokens=12, temperature=temperature, top_p=top_p, seed=[4, 5, 6]
    )
    for prompt, tokens in zip(PROMPTS, _rows(result)):
        log_probs = _step_log_probs(model, prompt, tokens)
        probs = tf.nn.softmax(log_probs / temperature).numpy()
        for step, token in enumerate(tokens):
            # Mass of the tokens more probable than this one: the nucleus stops at p.
            before = probs[step][probs[step] > probs[step, token]].sum()
            assert before < top_p


def test_top_k_1_and_a_vanishing_temperature_are_greedy(generators):
    generate = generators["cached"].generate
    greedy = _rows(generate(PROMPTS, max_new_tokens=8))
    assert _rows(generate(PROMPTS, max_new_tokens=8, temperature=1.0, top_k=1, seed=9)) == greedy
    assert _rows(generate(PROMPTS, max_new_tokens=8, temperature=1e-4, seed=9)) == greedy
    assert _rows(generate(PROMPTS, max_new_tokens=8, temperature=1.0, top_p=1e-6, seed=9)) == greedy


def test_rows_stop_at_the_end_token_or_their_own_limit(model, generators):
    free = _rows(generators["cached"].generate(PROMPTS, max_new_tokens=8, temperature=1.0,
                                               seed=[1, 2, 3]))
    # An end token that row 0 produces at a known step, first seen there.
    step = next(i for i, token in enumerate(free[0]) if i > 0 and token not in free[0][:i])
    stopping = Generator(model, eos_id=free[0][step])
    result = stopping.generate(PROMPTS, max_new_tokens=[8, 2, 5], temperature=1.0, seed=[1, 2, 3])
    rows = _rows(result)
    assert rows[0] == free[0][:step]
    assert len(rows[1]) <= 2 and len(rows[2]) <= 5


def test_an_empty_prompt_starts_from_the_start_token(generators):
    generate = generators["cached"].generate
    empty = _rows(generate(np.zeros((1, 3), "int32"), max_new_tokens=4))
    assert empty == _rows(generate(np.array([[BOS_ID]], "int32"), max_new_tokens=4))


def test_max_length_beyond_the_positional_table_is_a_clear_error(model):
    with pytest.raises(ValueError, match="max_length"):
        Generator(model, max_length=model.config.max_length + 1)
    with pytest.raises(ValueError, match="jit_compile"):
        UncachedGenerator(model, jit_compile=True)


@pytest.mark.parametrize("candidates", [1, 3, 5, 10])
def test_sorting_only_the_best_candidates_draws_the_same_tokens(model, candidates):
    settings = dict(max_new_tokens=8, temperature=[1.2, 0.9, 1.5], top_k=[0, 3, 5],
                    top_p=[0.7, 1.0, 0.9], seed=[3, 4, 5])
    whole = Generator(model, eos_id=NEVER, candidates=VOCAB).generate(PROMPTS, **settings)
    few = Generator(model, eos_id=NEVER, candidates=candidates).generate(PROMPTS, **settings)
    assert _rows(few) == _rows(whole)


def test_generation_runs_under_mixed_precision():
    keras.config.set_dtype_policy("mixed_bfloat16")
    keras.utils.set_random_seed(5)
    model = build_language_model("tiny", vocab_size=VOCAB)
    result = Generator(model, eos_id=NEVER).generate(
        PROMPTS, max_new_tokens=4, temperature=1.0, top_p=0.9, seed=1
    )
    tokens = result["tokens"].numpy()
    assert result["lengths"].numpy().tolist() == [4, 4, 4]
    assert not np.isin(tokens, [0, BOS_ID]).any() and tokens.max() < VOCAB


@pytest.mark.parametrize("kind", ["cached", "uncached"])
def test_no_prompts_give_no_rows(generators, kind):
    result = generators[kind].generate(np.zeros((0, 4), "int32"), max_new_tokens=5)
    assert result["tokens"].shape == (0, 0)
    assert result["lengths"].shape == (0,)
