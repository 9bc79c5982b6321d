"""Greedy and beam search over a `Seq2SeqTransformer`, with the key/value cache.

Shape notation: B batch, S source length, K beam width, L maximum output length,
V target vocabulary.

Each search is one `tf.function` built once per `SequenceSearch` and reused: a
`tf.while_loop` over fixed-shape state that computes only the newest position per
step (the decoder's self-attention reads the cache; the encoder output and the
cross-attention keys/values are computed once per sentence). It runs with XLA
(`jit_compile=True`, shapes static: the cache holds `max_length` positions) or
without (stock TF Serving): the cache then starts empty and grows by a position
per step (`keras_transformer/ops/cache.py`).

Every row gets its own length limit (its real source length + `extra_length`,
capped at `max_length`, or the caller's `max_new_tokens`), and finished rows are
frozen, so a sentence decodes the same alone and in a batch.

Without XLA a large batch is split into `parallel_searches` shards, each searched by
its own loop, all at once: a step's ops are too small for TensorFlow to spread one
over several cores (intra-op threads), but independent loops run side by side on
the inter-op threads. Rows are independent, so the output is unchanged.
"""

import numpy as np
import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE
from keras_transformer.constants import EOS_ID
from keras_transformer.constants import MIN_SHARD_ROWS
from keras_transformer.constants import PAD_ID
from keras_transformer.ops import checks
from keras_transformer.ops.cache import BATCH_AXIS
from keras_transformer.ops.cache import loop_shape_invariants

# "Minus infinity" for scores: finite, so sums and differences never give NaN.
NEG_INF = -1e9


def length_penalty(length, alpha):
    """GNMT's length penalty ((5 + length) / 6)^alpha (Wu et al., 2016, eq. 14)."""
    length = tf.cast(length, tf.float32)
    return tf.pow((5.0 + length) / 6.0, alpha)


def next_token_log_probs(logits, bos_id=BOS_ID, pad_id=PAD_ID):
    """Log-probabilities of the next token, never choosing padding or the start token.

    Args:
        logits: (..., V) float logits.

    Returns:
        (..., V) float32 log-probabilities, with PAD and BOS at about `NEG_INF`.
    """
    logits = tf.cast(logits, tf.float32)
    vocab_size = logits.shape[-1]
    if vocab_size is None:
        vocab_size = tf.shape(logits)[-1]
        banned = tf.logical_or(
            tf.equal(tf.range(vocab_size), pad_id), tf.equal(tf.range(vocab_size), bos_id)
        )
        logits = tf.where(banned, tf.constant(NEG_INF, tf.float32), logits)
    else:
        # A known vocabulary: one constant row and an add per step instead of five ops.
        banned = np.zeros(vocab_size, np.float32)
        banned[[pad_id, bos_id]] = NEG_INF
        logits = logits + banned
    return tf.nn.log_softmax(logits, axis=-1)


def coverage_penalty(coverage, source_mask):
    """GNMT's coverage penalty sum_i log(min(coverage_i, 1)) (Wu et al., 2016, eq. 14).

    Args:
        coverage: (..., S) float32, the attention each source token has had, summed
            over the target steps so far.
        source_mask: booleans broadcastable to `coverage`, True for real tokens.

    Returns:
        (...) float32, 0 when every real source token has had at least 1, below 0
        for each one that has had less.
    """
    covered = tf.math.log(tf.clip_by_value(coverage, 1e-6, 1.0))
    return tf.reduce_sum(tf.where(source_mask, covered, 0.0), axis=-1)


def strip_end(tokens, eos_id):
    """Replaces EOS and everything after it by PAD; returns (tokens, lengths)."""
    ended = tf.cumsum(tf.cast(tf.equal(tokens, eos_id), tf.int32), axis=-1) > 0
    tokens = tf.where(ended, tf.zeros_like(tokens), tokens)
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(tokens, PAD_ID), tf.int32), axis=-1)
    return tokens, lengths


def longest(lengths):
    """The largest of the int32 `lengths` (any shape); 0 when there are none.

    `tf.reduce_max` of no values is the dtype's minimum, which as a length makes
    an empty batch fail (`tf.range`, `tf.zeros`) instead of giving empty results.
    """
    return tf.maximum(tf.reduce_max(lengths), 0)


def _trim(result):
    """Cuts the (..., L) tokens to the longest hypothesis produced."""
    return {**result, "tokens": result["tokens"][..., : longest(result["lengths"])]}


def shard_sizes(batch_size, rows_per_sentence, shards):
    """Whether a batch is split into `shards` consecutive shards, and their sizes.

    Args:
        batch_size: B, a scalar int (tensor).
        rows_per_sentence: rows a sentence takes in the search (K for beam search).
        shards: P.

    Returns:
        `(split, sizes)`: a bool scalar, true when every shard gets `MIN_SHARD_ROWS`
        rows or more, and (P,) int32 sentences per shard, the first B % P one more.
    """
    batch_size = tf.convert_to_tensor(batch_size, tf.int32)
    split = batch_size * rows_per_sentence >= shards * MIN_SHARD_ROWS
    sizes = batch_size // shards + tf.cast(tf.range(shards) < batch_size % shards, tf.int32)
    return split, sizes


def _concat_rows(results):
    """Joins trimmed results of consecutive row shards, padding tokens to the longest."""
    longest = tf.reduce_max(tf.stack([tf.shape(result["tokens"])[-1] for result in results]))

    def pad(tokens):
        padding = [[0, 0]] * (tokens.shape.rank - 1) + [[0, longest - tf.shape(tokens)[-1]]]
        return tf.pad(tokens, padding)

    return {
        key: tf.concat(
            [pad(result[key]) if key == "tokens" else result[key] for result in results], axis=0
        )
        for key in results[0]
    }


class SequenceSearch:
    """Greedy and beam search for one model, each compiled once and reused.

    Args:
        model: a `Seq2SeqTransformer`.
        max_length: cap on the output length L (tokens, EOS included).
        extra_length: default limit per row = its source length + `extra_length`.
        beam_width: K for `beam_search`.
        alpha: length-penalty exponent for beam search (0 = raw log-probability).
        coverage: β, weight of GNMT's coverage penalty in beam search (0 = none): a
            hypothesis that ends before its attention has covered every source
            token scores β·Σ log(min(coverage, 1)) lower (`coverage_penalty`).
        jit_compile: compile the loops with XLA.
        growing_cache: let the key/value caches grow by a position per step (None:
            unless `jit_compile`, whose shapes must be static); False preallocates
            them for the longest row (`keras_transformer/ops/cache.py` compares both).
        parallel_searches: P, shards a batch is split into, searched at once (None:
            2 without XLA, 1 with it); a batch is split only when every shard gets
            `MIN_SHARD_ROWS` rows (sentences x K) or more. 1 never splits.
        bos_id: start token fed at position 0.
        eos_id: end token; a row stops when it produces it.

    Example:
        >>> search = SequenceSearch(model, beam_width=4, alpha=1.0)
        >>> result = search.greedy(source_ids)          # dict of tensors
        >>> result["tokens"].shape                      # (B, L)
        >>> search.beam_search(source_ids)["tokens"]    # (B, K, L), best first
    """

    def __init__(
        self,
        model,
        max_length=None,
        extra_length=50,
        beam_width=DEFAULT_BEAM_WIDTH,
        alpha=DEFAULT_ALPHA,
        coverage=DEFAULT_COVERAGE,
        jit_compile=False,
        growing_cache=None,
        parallel_searches=None,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    ):
        self.model = model
        self.max_length = checks.check_positive_int(
            "max_length", max_length or model.config.max_length
        )
        self.extra_length = checks.check_positive_int("extra_length", extra_length)
        self.beam_width = checks.check_positive_int("beam_width", beam_width)
        if not alpha >= 0:
            raise ValueError(f"`alpha` must be a number >= 0; received alpha={alpha!r}.")
        self.alpha = float(alpha)
        if not coverage >= 0:
            raise ValueError(f"`coverage` must be a number >= 0; received coverage={coverage!r}.")
        self.coverage = float(coverage)
        self.jit_compile = bool(jit_compile)
        if growing_cache and self.jit_compile:
            raise ValueError(
                "`growing_cache=True` needs `jit_compile=False`: XLA compiles static shapes "
                "only; received growing_cache=True, jit_compile=True."
            )
        self.growing_cache = not self.jit_compile if growing_cache is None else bool(growing_cache)
        if parallel_searches is None:
            parallel_searches = 1 if self.jit_compile else 2
        self.parallel_searches = checks.check_positive_int("parallel_searches", parallel_searches)
        if self.parallel_searches > 1 and self.jit_compile:
            raise ValueError(
                "`parallel_searches` > 1 needs `jit_compile=False`: XLA compiles one shape per "
                f"shard; received parallel_searches={parallel_searches}, jit_compile=True."
            )
        self.bos_id = int(bos_id)
        self.eos_id = int(eos_id)
        signature = [
            tf.TensorSpec([None, None], tf.int32, name="encoder_tokens"),
            tf.TensorSpec([], tf.int32, name="max_new_tokens"),
        ]
        # The loops may be XLA-compiled; trimming the output to its longest row is a
        # dynamic shape, so it happens in an outer graph function, as the sharding.
        greedy_loop = tf.function(
            self._greedy_search, input_signature=signature, jit_compile=self.jit_compile
        )
        beam_loop = tf.function(
            self._beam_search, input_signature=signature, jit_compile=self.jit_compile
        )
        self._greedy = tf.function(
            lambda tokens, limit: self._in_shards(greedy_loop, tokens, limit, rows_per_sentence=1),
            input_signature=signature,
        )
        self._beam = tf.function(
            lambda tokens, limit: self._in_shards(
                beam_loop, tokens, limit, rows_per_sentence=self.beam_width
            ),
            input_signature=signature,
        )

    # Public entry points -------------------------------------------------------

    def greedy(self, encoder_tokens, max_new_tokens=0):
        """Greedy decoding.

        Args:
            encoder_tokens: (B, S) int32 source ids, 0-padded.
            max_new_tokens: per-call limit on output tokens; 0 = the default rule.

        Returns:
            dict with "tokens" (B, L) int32, L = the longest output (EOS and what
            follows replaced by 0), "lengths"
            (B,) int32 and "scores" (B,) float32: the sum of log-probabilities.
        """
        return self._greedy(tf.cast(encoder_tokens, tf.int32), tf.constant(max_new_tokens, tf.int32))

    def beam_search(self, encoder_tokens, max_new_tokens=0):
        """Beam search of width K with GNMT's length and coverage penalties.

        Returns:
            dict with "tokens" (B, K, L), "lengths" (B, K) and "scores" (B, K):
            log-probability / length_penalty (+ β · coverage_penalty), hypotheses
            sorted best first.
        """
        return self._beam(tf.cast(encoder_tokens, tf.int32), tf.constant(max_new_tokens, tf.int32))

    def concrete_function(self, method="greedy"):
        """The traced graph function of `greedy` or `beam_search` (to inspect its ops)."""
        functions = {"greedy": self._greedy, "beam_search": self._beam}
        if method not in functions:
            raise ValueError(f"`method` must be one of {sorted(functions)}; received {method!r}.")
        return functions[method].get_concrete_function()

    # Shared pieces -------------------------------------------------------------

    def _in_shards(self, loop, encoder_tokens, max_new_tokens, rows_per_sentence):
        """Runs `loop` (a search) on the batch, or on `parallel_searches` shards of
        it at once when `shard_sizes` says so; returns the trimmed output."""
        whole = lambda: _trim(loop(encoder_tokens, max_new_tokens))  # noqa: E731
        if self.parallel_searches == 1:
            return whole()
        split, sizes = shard_sizes(
            tf.shape(encoder_tokens)[0], rows_per_sentence, self.parallel_searches
        )

        def in_shards():
            parts = tf.split(encoder_tokens, sizes, num=self.parallel_searches)
            # Independent calls: the executor runs them on the inter-op threads at once.
            return _concat_rows([_trim(loop(part, max_new_tokens)) for part in parts])

        return tf.cond(split, in_shards, whole)

    def _row_limits(self, encoder_tokens, max_new_tokens):
        """(B,) output-length limit of each row, and the cache length L."""
        source_lengths = tf.reduce_sum(tf.cast(tf.not_equal(encoder_tokens, PAD_ID), tf.int32), -1)
        default = source_lengths + self.extra_length
        limits = tf.where(max_new_tokens > 0, tf.fill(tf.shape(default), max_new_tokens), default)
        limits = tf.clip_by_value(limits, 1, self.max_length)
        if self.jit_compile:
            return limits, self.max_length  # XLA needs a static cache shape.
        return limits, longest(limits)

    def _start(self, encoder_tokens, max_new_tokens, repeats=1):
        encoder_outputs, encoder_mask = self.model.encode(encoder_tokens)
        limits, cache_length = self._row_limits(encoder_tokens, max_new_tokens)
        # Everything fixed for the search (fused kernels, source mask, cross-attention
        # keys and values, position table) is made here, outside the loop.
        cache, state = self.model.start_decoding(
            encoder_outputs, encoder_mask, cache_length, repeats=repeats,
            grow=self.growing_cache,
        )
        return limits, cache_length, cache, state

    def _while_loop(self, condition, body, loop_vars, length, cache_position):
        """`tf.while_loop` of at most `length` steps; a growing cache at
        `loop_vars[cache_position]` gets a free length."""
        shapes = None
        if self.growing_cache:
            shapes = loop_shape_invariants(loop_vars, caches=(cache_position,))
        return tf.while_loop(
            condition, body, loop_vars, shape_invariants=shapes, maximum_iterations=length
        )

    def _step(self, tokens, index, cache, state, return_cross_attention=False):
        """(log_probs, cache), and the step's (B, S) cross-attention if asked."""
        logits, *rest = self.model.decode_token(
            tokens, index, cache, state, return_cross_attention=return_cross_attention
        )
        return (next_token_log_probs(logits, bos_id=self.bos_id), *rest)

    # Greedy --------------------------------------------------------------------

    def _greedy_search(self, encoder_tokens, max_new_tokens):
        batch_size = tf.shape(encoder_tokens)[0]
        limits, length, self_cache, state = self._start(encoder_tokens, max_new_tokens)
        tokens = tf.zeros([batch_size, length], tf.int32)
        finished = tf.zeros([batch_size], tf.bool)
        scores = tf.zeros([batch_size], tf.float32)
        current = tf.fill([batch_size], self.bos_id)

        def condition(index, current, tokens, finished, scores, self_cache):
            return tf.logical_not(tf.reduce_all(finished))

        def body(index, current, tokens, finished, scores, self_cache):
            log_probs, self_cache = self._step(current, index, self_cache, state)
            chosen = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
            chosen_log_prob = tf.gather(log_probs, chosen, batch_dims=1)
            chosen = tf.where(finished, PAD_ID, chosen)
            scores += tf.where(finished, 0.0, chosen_log_prob)
            tokens = tf.tensor_scatter_nd_update(
                tokens,
                tf.stack([tf.range(batch_size), tf.fill([batch_size], index)], axis=1),
                chosen,
            )
            finished = finished | tf.equal(chosen, self.eos_id) | (index + 1 >= limits)
            return index + 1, chosen, tokens, finished, scores, self_cache

        _, _, tokens, _, scores, _ = self._while_loop(
            condition, body, (tf.constant(0), current, tokens, finished, scores, self_cache),
            length, cache_position=5,
        )
        tokens, lengths = strip_end(tokens, self.eos_id)
        return {"tokens": tokens, "lengths": lengths, "scores": scores}

    # Beam search ---------------------------------------------------------------

    def _beam_search(self, encoder_tokens, max_new_tokens):
        beam = self.beam_width
        batch_size = tf.shape(encoder_tokens)[0]
        limits, length, self_cache, state = self._start(
            encoder_tokens, max_new_tokens, repeats=beam
        )
        # Alive hypotheses start as K copies of the empty one; only the first counts.
        alive_tokens = tf.zeros([batch_size, beam, length], tf.int32)
        alive_log_probs = tf.tile(
            tf.constant([[0.0] + [NEG_INF] * (beam - 1)], tf.float32), [batch_size, 1]
        )
        finished_tokens = tf.zeros([batch_size, beam, length], tf.int32)
        finished_scores = tf.fill([batch_size, beam], NEG_INF)
        done = tf.zeros([batch_size], tf.bool)
        current = tf.fill([batch_size * beam], self.bos_id)
        best_possible_penalty = length_penalty(limits, self.alpha)  # (B,)
        with_coverage = self.coverage > 0
        coverage_state = ()
        if with_coverage:
            source_mask = tf.not_equal(encoder_tokens, PAD_ID)[:, None, :]  # (B, 1, S)
            # How much attention each source token has had, per alive hypothesis.
            coverage_state = (
                tf.zeros([batch_size, beam, tf.shape(encoder_tokens)[1]], tf.float32),
            )

        def body(index, current, alive_tokens, alive_log_probs, finished_tokens,
                 finished_scores, self_cache, done, alive_coverage=None):
            if with_coverage:
                log_probs, self_cache, attention = self._step(
                    current, index, self_cache, state, return_cross_attention=True
                )
                # This step's attention is its parent's: every candidate of a parent shares it.
                alive_coverage += tf.reshape(attention, tf.shape(alive_coverage))
            else:
                log_probs, self_cache = self._step(current, index, self_cache, state)
            vocab_size = tf.shape(log_probs)[-1]
            log_probs = tf.reshape(log_probs, [batch_size, beam, vocab_size])
            candidates = tf.reshape(alive_log_probs[:, :, None] + log_probs, [batch_size, -1])
            # 2K candidates: even if K of them end here, K stay alive.
            top_log_probs, top_indices = tf.math.top_k(candidates, k=2 * beam)
            source_beams = top_indices // vocab_size
            top_tokens = top_indices % vocab_size
            top_sequences = tf.gather(alive_tokens, source_beams, batch_dims=1)  # (B, 2K, L)
            position = tf.one_hot(index, length, dtype=tf.int32)
            top_sequences += top_tokens[:, :, None] * position[None, None, :]

            at_limit = (index + 1 >= limits)[:, None]
            # EOS ends a hypothesis only among the K best candidates (as in fairseq), so
            # that a beam of width 1 is exactly greedy search.
            among_best = tf.range(2 * beam) < beam
            ends_here = (tf.equal(top_tokens, self.eos_id) & among_best) | at_limit
            frozen = done[:, None]

            # Hypotheses that end here join the finished set, ranked by normalised score.
            ended_scores = top_log_probs / length_penalty(index + 1, self.alpha)
            if with_coverage:
                top_coverage = tf.gather(alive_coverage, source_beams, batch_dims=1)  # (B, 2K, S)
                ended_scores += self.coverage * coverage_penalty(top_coverage, source_mask)
            ended_scores = tf.where(ends_here & ~frozen, ended_scores, NEG_INF)
            merged_scores = tf.concat([finished_scores, ended_scores], axis=1)
            merged_tokens = tf.concat([finished_tokens, top_sequences], axis=1)
            finished_scores, keep = tf.math.top_k(merged_scores, k=beam)
            finished_tokens = tf.gather(merged_tokens, keep, batch_dims=1)

            # The rest stay alive: the best K that did not produce EOS.
            dead = tf.equal(top_tokens, self.eos_id) | ends_here | frozen
            alive_candidates = tf.where(dead, NEG_INF, top_log_probs)
            alive_log_probs, keep = tf.math.top_k(alive_candidates, k=beam)
            alive_tokens = tf.gather(top_sequences, keep, batch_dims=1)
            parents = tf.gather(source_beams, keep, batch_dims=1)  # (B, K)
            flat_parents = tf.reshape(parents + tf.range(batch_size)[:, None] * beam, [-1])
            self_cache = tf.nest.map_structure(
                lambda cache: tf.gather(cache, flat_parents, axis=BATCH_AXIS), self_cache
            )
            current = tf.reshape(tf.gather(top_tokens, keep, batch_dims=1), [-1])
            if with_coverage:
                alive_coverage = tf.gather(top_coverage, keep, batch_dims=1)

            # A row is done once no alive hypothesis can beat its K-th finished one:
            # log-probabilities only fall, the length penalty is at most that of the
            # limit, and the coverage penalty is never above 0.
            best_alive_bound = alive_log_probs[:, 0] / best_possible_penalty
            done = done | at_limit[:, 0] | (finished_scores[:, -1] >= best_alive_bound)
            loop_vars = (index + 1, current, alive_tokens, alive_log_probs, finished_tokens,
                         finished_scores, self_cache, done)
            return loop_vars + ((alive_coverage,) if with_coverage else ())

        def condition(index, current, alive_tokens, alive_log_probs, finished_tokens,
                      finished_scores, self_cache, done, *coverage):
            return tf.logical_not(tf.reduce_all(done))

        state = self._while_loop(
            condition,
            body,
            (tf.constant(0), current, alive_tokens, alive_log_probs, finished_tokens,
             finished_scores, self_cache, done) + coverage_state,
            length, cache_position=6,
        )
        finished_tokens, finished_scores = state[4], state[5]
        tokens, lengths = strip_end(finished_tokens, self.eos_id)
        return {"tokens": tokens, "lengths": lengths, "scores": finished_scores}
