"""Samplers: how `GreedySearch` picks each row's one token from its log-probabilities.

Shape notation: B rows, V vocabulary, C candidates.

As KerasHub's samplers, a sampler is an object: `BestSampler` takes the most probable
token; `RandomSampler` samples with one temperature, top-k and top-p a row (0, 0
and 1 turn them off; a row of temperature 0 takes the most probable token), as the
export's `sample` signature takes them. The randomness is stateless: row b's draw
for the token at position t comes from `tf.random.stateless_uniform(seed=[seed_b,
t])`, so a row's text depends on its own seed and prompt only, never on the other
rows of the batch. (XLA draws other numbers from the same seed than the graph
executor: the same seed gives the same text under the same `jit_compile` setting.)

A draw is one uniform number a row, read through the inverse cumulative
distribution of the kept tokens: in id order when no filter is on (no sort), else
among the `candidates` best tokens sorted once (the whole vocabulary when a row's
top-k or nucleus may reach past them, with the same result).
"""

import tensorflow as tf

from keras_transformer.decoding.loop import NEG_INF


def _row_uniforms(seeds, positions):
    """(B,) uniforms in [0, 1): row b's from the stateless seed [seeds[b], positions[b]]."""
    pairs = tf.stack([tf.cast(seeds, tf.int64), tf.cast(positions, tf.int64)], axis=1)
    # One seed per row: the stateless ops take one seed per call, hence the map.
    return tf.map_fn(
        lambda seed: tf.random.stateless_uniform([], seed=seed),
        pairs,
        fn_output_signature=tf.float32,
    )


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


class BestSampler:
    """Takes each row's most probable token (greedy search)."""

    def __call__(self, log_probs, position):
        """(B, V) log-probabilities → (B,) int32 token ids; `position` is unused."""
        return tf.argmax(log_probs, axis=-1, output_type=tf.int32)


class RandomSampler:
    """Samples each row's token after its temperature, top-k and top-p (`choose_tokens`).

    Args:
        temperature: (B,) floats; <= 0 takes the most probable token.
        top_k: (B,) ints; 0 = off.
        top_p: (B,) floats; 1 = off.
        seeds: (B,) integer seeds of the stateless draws.
        candidates: C, how many best tokens a filtered draw sorts first.
    """

    def __init__(self, temperature, top_k, top_p, seeds, candidates=64):
        self.temperature = tf.cast(temperature, tf.float32)
        self.top_k = tf.cast(top_k, tf.int32)
        self.top_p = tf.cast(top_p, tf.float32)
        self.seeds = tf.cast(seeds, tf.int64)
        self.candidates = candidates
        self.batch_shape = tf.shape(self.seeds)[:1]  # read once, outside the loop

    def __call__(self, log_probs, position):
        """(B, V) log-probabilities → (B,) int32 token ids for sequence position `position`."""
        positions = tf.fill(self.batch_shape, position)
        return choose_tokens(log_probs, self.temperature, self.top_k, self.top_p, self.seeds,
                             positions, self.candidates)
