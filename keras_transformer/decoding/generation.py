"""Text generation with a `LanguageModel`: greedy, temperature, top-k and top-p
sampling, with the key/value cache, in one compiled `tf.while_loop`.

Shape notation: B batch, P prompt length, L sequence length (prompt and new
tokens), N new tokens, V vocabulary.

Prompts come right-padded (0 = padding) and of different lengths. The loop feeds
one token per step from position 0: while a row is still inside its prompt, the
next token is the prompt's; after it, the sampled one. So every row runs the same
fixed-shape step (`LanguageModel.decode_token`, the translator's step without
cross-attention) and rows of any lengths share a batch.

Every setting is one value a row (as the export's `sample` signature takes them):
`temperature` 0 is greedy; `top_k` 0 and `top_p` 1 turn those filters off; padding,
the start token and the unknown piece are never generated, at any temperature. The
randomness is stateless: row b's draw for the token at position t comes from
`tf.random.stateless_uniform(seed=[seed_b, t])`, so a row's text depends on its
own seed and prompt only, never on the other rows of the batch. (XLA draws other
numbers from the same seed than the graph executor: the same seed gives the same
text under the same `jit_compile` setting.)

A draw is one uniform number a row, read through the inverse cumulative
distribution of the kept tokens: in id order when no filter is on (no sort), else
among the `candidates` best tokens sorted once (the whole vocabulary when a row's
top-k or nucleus may reach past them, with the same result).

`Generator(model, cached=False)` reruns the whole model on the full prefix at every
step: the reference that tests compare the cached loop with, and `bench/`'s
baseline.
"""

import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import EOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.constants import UNK_ID
from keras_transformer.decoding.search import NEG_INF
from keras_transformer.decoding.search import longest
from keras_transformer.decoding.search import next_token_log_probs
from keras_transformer.decoding.search import strip_end
from keras_transformer.ops import checks
from keras_transformer.ops.cache import loop_shape_invariants


def _row_uniforms(seeds, positions):
    """(B,) uniforms in [0, 1): row b's from the stateless seed [seeds[b], positions[b]]."""
    pairs = tf.stack([tf.cast(seeds, tf.int64), tf.cast(positions, tf.int64)], axis=1)
    # One seed per row: the stateless ops take one seed per call, hence the map.
    return tf.map_fn(
        lambda seed: tf.random.stateless_uniform([], seed=seed),
        pairs,
        fn_output_signature=tf.float32,
    )


def _never_unknown(log_probs):
    """(B, V) log-probabilities with the unknown piece banned like padding and BOS."""
    unknown = tf.equal(tf.range(tf.shape(log_probs)[-1]), UNK_ID)
    return tf.where(unknown, tf.constant(NEG_INF, log_probs.dtype), log_probs)


def _inverse_cdf(probs, uniforms):
    """(B,) index of the first entry whose cumulative probability passes u·total."""
    cumulative = tf.cumsum(probs, axis=-1)
    threshold = uniforms * cumulative[:, -1]
    index = tf.reduce_sum(tf.cast(cumulative <= threshold[:, None], tf.int32), axis=-1)
    # Entries of probability 0 after the last kept one are never reached; the clip only
    # guards against rounding at the very end.
    return tf.minimum(index, tf.shape(probs)[-1] - 1)


def _filtered_draw(sorted_log_probs, order, top_k, top_p, uniforms):
    """Draws among the best tokens kept by top-k, then top-p.

    Args:
        sorted_log_probs: (B, C) the C best log-probabilities (normalised over the
            whole vocabulary), best first.
        order: (B, C) their token ids.
        top_k, top_p, uniforms: (B,) as in `choose_tokens`.

    Returns:
        (B,) int32 token ids.
    """
    probs = tf.exp(sorted_log_probs)
    ranks = tf.range(tf.shape(probs)[-1])[None, :]
    keep = (top_k[:, None] <= 0) | (ranks < top_k[:, None])
    # The nucleus is measured within the top-k tokens (all of them: mass 1).
    kept_mass = tf.where(top_k > 0, tf.reduce_sum(tf.where(keep, probs, 0.0), axis=-1), 1.0)
    before = tf.cumsum(probs, axis=-1, exclusive=True)
    keep &= (before < (top_p * kept_mass)[:, None]) | (ranks == 0)
    probs = tf.where(keep, probs, 0.0)
    rank = tf.minimum(
        _inverse_cdf(probs, uniforms), tf.reduce_sum(tf.cast(keep, tf.int32), axis=-1) - 1
    )
    return tf.gather(order, rank, batch_dims=1)


def choose_tokens(log_probs, temperature, top_k, top_p, seeds, positions, candidates=64):
    """Picks each row's next token: greedy, or sampled after temperature, top-k, top-p.

    Args:
        log_probs: (B, V) float32 next-token log-probabilities
            (`next_token_log_probs`: padding and the start token excluded, at
            about NEG_INF; they stay excluded at every temperature).
        temperature: (B,) float32; <= 0 picks the most probable token (greedy);
            infinity draws uniformly among the tokens top-k and top-p keep.
        top_k: (B,) int32; k > 0 samples among the k most probable tokens only.
        top_p: (B,) float32; samples among the fewest most probable tokens (after
            top-k) whose probability reaches p (nucleus sampling; the most probable
            always stays); 1 keeps all.
        seeds: (B,) integer seeds.
        positions: (B,) int32 position of the token being chosen (the stateless
            draw's counter).
        candidates: C, how many best tokens a filtered draw sorts; when a row's
            top-k or nucleus may reach past them, the step sorts the whole
            vocabulary instead (the same tokens, slower).

    Returns:
        (B,) int32 token ids.
    """
    greedy = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
    sampling = temperature > 0.0
    filtering = sampling & ((top_k > 0) | (top_p < 1.0))
    plain = sampling & ~filtering

    def sample():
        safe_temperature = tf.where(sampling, temperature, 1.0)
        # Banned tokens stay impossible at any temperature (an infinite one would
        # scale their NEG_INF to the others' 0); the rest are scaled.
        allowed = log_probs > NEG_INF / 2
        scaled = tf.where(allowed, log_probs / safe_temperature[:, None], -float("inf"))
        log_p = tf.nn.log_softmax(scaled, axis=-1)
        uniforms = _row_uniforms(seeds, positions)
        vocab_size = log_p.shape[-1]  # static: the output projection's

        def plain_draw():  # the whole vocabulary in id order: no sort
            return _inverse_cdf(tf.exp(log_p), uniforms)

        def ranked(count):
            # Ranked by the unscaled log-probabilities: a huge temperature makes the
            # scaled ones tie, and top_k would break ties towards the lowest ids.
            order = tf.math.top_k(log_probs, k=count).indices
            return tf.gather(log_p, order, batch_dims=1), order

        def filtered_draw():
            count = min(candidates, vocab_size)
            best, order = ranked(count)
            # Rows whose kept tokens surely lie among the C best.
            within = ((top_k > 0) & (top_k <= count)) | (
                (top_k <= 0) & (tf.reduce_sum(tf.exp(best), axis=-1) >= top_p)
            )
            return tf.cond(
                tf.reduce_all(within | ~filtering),
                lambda: _filtered_draw(best, order, top_k, top_p, uniforms),
                lambda: _filtered_draw(*ranked(vocab_size), top_k, top_p, uniforms),
            )

        never = tf.zeros_like(greedy)
        chosen = tf.where(filtering, tf.cond(tf.reduce_any(filtering), filtered_draw,
                                             lambda: never), greedy)
        return tf.where(plain, tf.cond(tf.reduce_any(plain), plain_draw, lambda: never), chosen)

    # An all-greedy batch skips the draws.
    return tf.cond(tf.reduce_any(sampling), sample, lambda: greedy)


class Generator:
    """Generation for one `LanguageModel`, compiled once and reused.

    Args:
        model: a `LanguageModel` (`keras_transformer.build_language_model`).
        max_length: cap on a row's length, prompt and new tokens together
            (default: the model's `config.max_length`, its positional table).
        jit_compile: compile the loop with XLA (the cache then always holds
            `max_length` positions, a static shape).
        cached: False reruns the whole model on the full prefix at every step (the
            uncached reference; no XLA).
        bos_id: the token an empty prompt starts from.
        eos_id: a row stops after producing it.
        candidates: how many best tokens a top-k or top-p draw sorts first
            (`choose_tokens`); a row that may need more sorts the vocabulary.

    Example:
        >>> generator = Generator(build_language_model("tiny", vocab_size=100))
        >>> result = generator.generate([[2, 17, 5, 0], [2, 9, 0, 0]], max_new_tokens=8,
        ...                             temperature=0.8, top_p=0.9, seed=[1, 2])
        >>> result["tokens"].shape  # (B, N): new tokens, EOS and after them 0
    """

    def __init__(
        self, model, max_length=None, jit_compile=False, cached=True, bos_id=BOS_ID, eos_id=EOS_ID,
        candidates=64,
    ):
        self.model = model
        self.max_length = checks.check_positive_int(
            "max_length", max_length or model.config.max_length
        )
        if self.max_length > model.config.max_length:
            raise ValueError(
                f"`max_length` must be at most the model's max_length "
                f"({model.config.max_length}, its positional table); received {max_length}."
            )
        self.jit_compile = bool(jit_compile)
        self.cached = bool(cached)
        if self.jit_compile and not self.cached:
            raise ValueError(
                "`jit_compile=True` needs `cached=True`: the uncached loop's prefix grows "
                "every step, a shape XLA cannot compile once."
            )
        self.bos_id = int(bos_id)
        self.eos_id = int(eos_id)
        self.candidates = checks.check_positive_int("candidates", candidates)
        row = lambda dtype, name: tf.TensorSpec([None], dtype, name=name)  # noqa: E731
        signature = [
            tf.TensorSpec([None, None], tf.int32, name="prompts"),
            row(tf.int32, "max_new_tokens"),
            row(tf.float32, "temperature"),
            row(tf.int32, "top_k"),
            row(tf.float32, "top_p"),
            row(tf.int64, "seed"),
        ]
        # The loop may be XLA-compiled; cutting the new tokens out of the sequences
        # is a dynamic shape, so it happens in an outer graph function.
        loop = tf.function(self._loop, jit_compile=self.jit_compile)
        self._generate = tf.function(
            lambda *args: self._new_tokens(*loop(*args)), input_signature=signature
        )

    def generate(
        self, prompts, max_new_tokens=32, temperature=0.0, top_k=0, top_p=1.0, seed=0
    ):
        """Continues each prompt.

        Args:
            prompts: (B, P) int token ids, right-padded with 0 (an all-padding row
                starts from `bos_id`).
            max_new_tokens: new tokens at most, one int or (B,); a row also stops
                at `max_length` tokens, prompt included (a longer prompt gets none).
                Any int32 is accepted (clamped to [0, max_length]).
            temperature: one float or (B,); 0 = greedy.
            top_k: one int or (B,); 0 = off.
            top_p: one float in (0, 1] or (B,); 1 = off.
            seed: one int or (B,): the same seed, prompt and settings give the
                same tokens.

        Returns:
            dict with "tokens" (B, N) int32, each row's new tokens (EOS and what
            follows replaced by 0, N the longest row) and "lengths" (B,) int32.
        """
        prompts = tf.convert_to_tensor(prompts, tf.int32)
        checks.check_rank("prompts", prompts.shape, 2)
        batch = tf.shape(prompts)[:1]

        def rows(value, dtype):
            return tf.broadcast_to(tf.cast(value, dtype), batch)

        return self._generate(
            prompts,
            rows(max_new_tokens, tf.int32),
            rows(temperature, tf.float32),
            rows(top_k, tf.int32),
            rows(top_p, tf.float32),
            rows(seed, tf.int64),
        )

    def concrete_function(self):
        """The traced graph function of `generate` (to inspect its ops)."""
        return self._generate.get_concrete_function()

    # The loop ------------------------------------------------------------------

    def _loop(self, prompts, max_new_tokens, temperature, top_k, top_p, seed):
        """Returns the (B, L) sequences, prompt lengths and row limits."""
        batch_size = tf.shape(prompts)[0]
        prompt_lengths = tf.reduce_sum(tf.cast(tf.not_equal(prompts, PAD_ID), tf.int32), -1)
        empty = tf.equal(prompt_lengths, 0)
        first = tf.range(tf.shape(prompts)[1])[None, :] == 0
        prompts = tf.where(empty[:, None] & first, self.bos_id, prompts)
        prompt_lengths = tf.maximum(prompt_lengths, 1)
        # Clamped before any arithmetic: a huge request cannot overflow int32.
        max_new_tokens = tf.clip_by_value(max_new_tokens, 0, self.max_length)
        totals = prompt_lengths + max_new_tokens
        if self.jit_compile:
            length = self.max_length  # XLA needs a static cache shape.
        else:
            length = tf.minimum(longest(totals), self.max_length)
        # A row's sequence ends at its limit (prompt + max_new_tokens, capped).
        limits = tf.minimum(totals, length)
        prompt_lengths = tf.minimum(prompt_lengths, length)
        sequences = tf.concat([prompts, tf.zeros([batch_size, length], tf.int32)], axis=1)
        sequences = sequences[:, :length]
        finished = limits <= 1
        if self.cached:
            cache, state = self.model.start_decoding(
                batch_size, length, grow=not self.jit_compile
            )
        else:
            cache, state = (), None
        rows = tf.range(batch_size)

        def condition(index, sequences, finished, cache):
            return tf.logical_not(tf.reduce_all(finished))

        def body(index, sequences, finished, cache):
            current = tf.gather(sequences, index, axis=1)
            if self.cached:
                logits, cache = self.model.decode_token(current, index, cache, state)
            else:
                logits = self.model(sequences[:, : index + 1], training=False)[:, -1]
            position = index + 1
            positions = tf.fill([batch_size], position)
            chosen = choose_tokens(
                _never_unknown(next_token_log_probs(logits, bos_id=self.bos_id)),
                temperature, top_k, top_p, seed, positions, self.candidates,
            )
            in_prompt = position < prompt_lengths
            chosen = tf.where(finished, PAD_ID, chosen)
            chosen = tf.where(in_prompt, tf.gather(sequences, position, axis=1), chosen)
            sequences = tf.tensor_scatter_nd_update(
                sequences, tf.stack([rows, positions], axis=1), chosen
            )
            ended = ~in_prompt & tf.equal(chosen, self.eos_id)
            finished = finished | ended | (position + 1 >= limits)
            return position, sequences, finished, cache

        loop_vars = (tf.constant(0), sequences, finished, cache)
        shapes = None if self.jit_compile else loop_shape_invariants(loop_vars, caches=(3,))
        _, sequences, _, _ = tf.while_loop(
            condition, body, loop_vars, shape_invariants=shapes, maximum_iterations=length - 1
        )
        return sequences, prompt_lengths, limits

    def _new_tokens(self, sequences, prompt_lengths, limits):
        new_lengths = limits - prompt_lengths
        positions = prompt_lengths[:, None] + tf.range(longest(new_lengths))[None, :]
        valid = positions < limits[:, None]
        last = tf.shape(sequences)[1] - 1
        tokens = tf.gather(sequences, tf.minimum(positions, last), batch_dims=1)
        tokens, lengths = strip_end(tf.where(valid, tokens, PAD_ID), self.eos_id)
        return {"tokens": tokens[:, : longest(lengths)], "lengths": lengths}
