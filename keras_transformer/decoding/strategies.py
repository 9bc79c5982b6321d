"""Decoding strategies of the one loop (`keras_transformer.decoding.loop.decode`).

Shape notation: B batch, K beam width, R rows the step runs (B, or B·K), L output
positions, V vocabulary, S source length.

A strategy says what the loop feeds first and what it keeps (`start`), turns each
step's (R, V) log-probabilities into the next tokens (`step`, which may also move
hypotheses between rows: the loop then reorders the cache), says when every row is
done (`all_done`) and which rows are (`rows_done`), and gives the results
(`finish`). Every row gets its own limit (`Rows.limits`) and finished rows are
frozen, whatever scores a step gives them, so a row decodes the same alone and in
a batch, and a loop may drop it from the step. A strategy object serves one
`decode` call (it keeps the batch's `Rows`): the searches make theirs inside the
traced function.
"""

import math

import tensorflow as tf

from keras_transformer.constants import EOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding.loop import NEG_INF
from keras_transformer.decoding.loop import strip_end
from keras_transformer.decoding.samplers import BestSampler


def length_penalty(length, alpha):
    """GNMT's length penalty ((5 + length) / 6)^alpha (Wu et al., 2016, eq. 14)."""
    length = tf.cast(length, tf.float32)
    return tf.pow((5.0 + length) / 6.0, alpha)


def chunk_size(vocab_size):
    """The chunk width `top_k_by_chunks` reads a hypothesis' V scores in: the divisor of
    V nearest √(V/2) (two small top-k then cost about as much as each other), or None
    when V (unknown, or with no divisor of at least 8) leaves a plain top-k."""
    if not vocab_size or vocab_size < 64:
        return None
    target = math.sqrt(vocab_size / 2)
    divisors = [d for d in range(8, vocab_size // 8 + 1) if vocab_size % d == 0]
    return min(divisors, key=lambda d: abs(d - target)) if divisors else None


def top_k_by_chunks(values, k, chunk):
    """`tf.math.top_k(values, k)` of (B, N) values, N a multiple of `chunk`, in two small
    top-k: the k best values lie in the k chunks of largest maximum (a chunk outside
    them has k larger maxima, each from another chunk, above its every value).

    `TopKV2` on CPU scans with a branching heap, several times slower per value than
    the vectorised maximum of a chunk: a plain top-k of the demo export's 20,000
    candidates (beam 4, 5,000 pieces) takes a quarter as much kernel time as its fused
    matmuls at batch 32 (`python -m bench export`).

    Returns:
        `(values, indices)`, each (B, k), best first (equal values may come in
        another order than `tf.math.top_k`'s).
    """
    batch_size = tf.shape(values)[0]
    chunks = tf.reshape(values, [batch_size, -1, chunk])  # (B, N / chunk, chunk)
    _, best_chunks = tf.math.top_k(tf.reduce_max(chunks, axis=-1), k=k)  # (B, k)
    members = tf.reshape(tf.gather(chunks, best_chunks, batch_dims=1), [batch_size, k * chunk])
    top_values, positions = tf.math.top_k(members, k=k)
    indices = tf.gather(best_chunks, positions // chunk, batch_dims=1) * chunk + positions % chunk
    return top_values, indices


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


class GreedySearch:
    """One hypothesis a row: each step's token comes from `sampler`.

    With `BestSampler` (the default) this is greedy search; with `RandomSampler`,
    sampling. Rows inside their prompt (`Rows.prompts`) take the prompt's next
    token instead, and a prompt's EOS does not end its row.

    Args:
        sampler: `sampler(log_probs, position) -> (B,) int32`, `position` the
            sequence position of the chosen token (the step's index + 1).
        eos_id: a row stops after producing it.
        scores: keep each row's sum of log-probabilities of its chosen tokens.

    `finish` returns a dict with "tokens" (B, L) int32 (prompts, then the chosen
    tokens; a chosen EOS and what follows replaced by 0), "lengths" (B,) int32
    (tokens other than 0) and, with `scores`, "scores" (B,) float32.
    """

    rows_per_sentence = 1
    wants_attention = False

    def __init__(self, sampler=None, eos_id=EOS_ID, scores=True):
        self.sampler = BestSampler() if sampler is None else sampler
        self.eos_id = int(eos_id)
        self.scores = bool(scores)

    def start(self, rows):
        """`(first tokens (B,), state)` for the batch's `Rows`."""
        self.rows = rows
        # Read once, outside the loop: a step then needs no Shape op for it.
        self.batch_size = batch_size = tf.shape(rows.start_tokens)[0]
        self.row_ids = tf.range(batch_size)
        if rows.prompts is None:
            tokens = tf.zeros([batch_size, rows.length], tf.int32)
        else:
            tokens = rows.prompts
        state = {"tokens": tokens, "finished": rows.limits <= 0}
        if self.scores:
            state["scores"] = tf.zeros([batch_size], tf.float32)
        return rows.start_tokens, state

    def all_done(self, state):
        """A bool scalar: every row has finished."""
        return tf.reduce_all(state["finished"])

    def rows_done(self, state):
        """(B,) bool: the rows that have finished (frozen from then on)."""
        return state["finished"]

    def step(self, index, log_probs, state, attention=None):
        """Chooses the token at output position `index`.

        Args:
            index: scalar int32, the step.
            log_probs: (B, V) float32 next-token log-probabilities.
            state: from `start` or the last step.
            attention: unused (`wants_attention` is False).

        Returns:
            `(tokens, state, parents)`: the (B,) tokens fed next, the new state and
            None (rows never move).
        """
        rows, batch_size = self.rows, self.batch_size
        finished = state["finished"]
        position = index + 1  # of the chosen token in the sequence
        chosen = self.sampler(log_probs, position)
        state = dict(state)
        if self.scores:
            chosen_log_prob = tf.gather(log_probs, chosen, batch_dims=1)
            state["scores"] = state["scores"] + tf.where(finished, 0.0, chosen_log_prob)
        chosen = tf.where(finished, PAD_ID, chosen)
        if rows.prompts is None:
            ended = tf.equal(chosen, self.eos_id)
        else:
            in_prompt = index < rows.prompt_lengths
            chosen = tf.where(in_prompt, tf.gather(state["tokens"], index, axis=1), chosen)
            ended = ~in_prompt & tf.equal(chosen, self.eos_id)
        state["tokens"] = tf.tensor_scatter_nd_update(
            state["tokens"],
            tf.stack([self.row_ids, tf.fill([batch_size], index)], axis=1),
            chosen,
        )
        state["finished"] = finished | ended | (position >= rows.limits)
        return chosen, state, None

    def finish(self, state):
        """The results dict (see the class docstring)."""
        tokens = state["tokens"]
        if self.rows.prompts is None:
            tokens, lengths = strip_end(tokens, self.eos_id)
        else:  # a prompt's own EOS ends nothing
            generated = tf.range(tf.shape(tokens)[1])[None, :] >= self.rows.prompt_lengths[:, None]
            tokens, lengths = strip_end(tokens, self.eos_id, generated)
        result = {"tokens": tokens, "lengths": lengths}
        if self.scores:
            result["scores"] = state["scores"]
        return result


class BeamSearch:
    """Beam search of width K with GNMT's length and coverage penalties.

    Args:
        beam_width: K.
        alpha: length-penalty exponent (0 = raw log-probability).
        coverage: β, weight of the coverage penalty (0 = none): a hypothesis that
            ends before its attention has covered every real source token
            (`Rows.source_mask`) scores β·Σ log(min(coverage, 1)) lower.
        eos_id: a hypothesis ends with it.

    `finish` returns a dict with "tokens" (B, K, L), "lengths" (B, K) and "scores"
    (B, K): log-probability / length_penalty (+ β · coverage_penalty), hypotheses
    sorted best first.
    """

    def __init__(self, beam_width, alpha=0.0, coverage=0.0, eos_id=EOS_ID):
        self.rows_per_sentence = int(beam_width)
        self.alpha = float(alpha)
        self.coverage = float(coverage)
        self.eos_id = int(eos_id)
        self.wants_attention = self.coverage > 0

    def start(self, rows):
        """`(first tokens (B·K,), state)` for the batch's `Rows`."""
        beam = self.rows_per_sentence
        self.rows = rows
        self.batch_size = batch_size = tf.shape(rows.start_tokens)[0]
        length = rows.length
        # Alive hypotheses start as K copies of the empty one; only the first counts.
        state = {
            "alive_tokens": tf.zeros([batch_size, beam, length], tf.int32),
            "alive_log_probs": tf.tile(
                tf.constant([[0.0] + [NEG_INF] * (beam - 1)], tf.float32), [batch_size, 1]
            ),
            "finished_tokens": tf.zeros([batch_size, beam, length], tf.int32),
            "finished_scores": tf.fill([batch_size, beam], NEG_INF),
            "done": tf.zeros([batch_size], tf.bool),
        }
        if self.wants_attention:
            self.source_mask = rows.source_mask[:, None, :]  # (B, 1, S)
            # How much attention each source token has had, per alive hypothesis.
            state["alive_coverage"] = tf.zeros(
                [batch_size, beam, tf.shape(rows.source_mask)[1]], tf.float32
            )
        self.best_possible_penalty = length_penalty(rows.limits, self.alpha)  # (B,)
        return tf.repeat(rows.start_tokens, beam), state

    def all_done(self, state):
        """A bool scalar: no row's alive hypotheses can beat its finished ones."""
        return tf.reduce_all(state["done"])

    def rows_done(self, state):
        """(B·K,) bool: the rows of the sentences that are done (frozen from then on)."""
        return tf.repeat(state["done"], self.rows_per_sentence)

    def step(self, index, log_probs, state, attention=None):
        """Extends the hypotheses by the token at output position `index`.

        Args:
            index: scalar int32, the step.
            log_probs: (B·K, V) float32 next-token log-probabilities, row b·K + k
                hypothesis k of sentence b.
            state: from `start` or the last step.
            attention: (B·K, S) float32 cross-attention of the step (with coverage).

        Returns:
            `(tokens, state, parents)`: the (B·K,) tokens fed next, the new state
            and the (B·K,) row each new hypothesis continues (its cache's row).
        """
        beam = self.rows_per_sentence
        limits = self.rows.limits
        length = self.rows.length
        done, batch_size = state["done"], self.batch_size
        if self.wants_attention:
            # This step's attention is its parent's: every candidate of a parent shares it.
            alive_coverage = state["alive_coverage"]
            alive_coverage += tf.reshape(attention, tf.shape(alive_coverage))
        chunk = chunk_size(log_probs.shape[-1])
        vocab_size = tf.shape(log_probs)[-1]
        log_probs = tf.reshape(log_probs, [batch_size, beam, vocab_size])
        candidates = tf.reshape(state["alive_log_probs"][:, :, None] + log_probs, [batch_size, -1])
        # 2K candidates: even if K of them end here, K stay alive.
        if chunk is None:
            top_log_probs, top_indices = tf.math.top_k(candidates, k=2 * beam)
        else:
            top_log_probs, top_indices = top_k_by_chunks(candidates, 2 * beam, chunk)
        source_beams = top_indices // vocab_size
        top_tokens = top_indices % vocab_size
        top_sequences = tf.gather(state["alive_tokens"], source_beams, batch_dims=1)  # (B, 2K, L)
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
        if self.wants_attention:
            top_coverage = tf.gather(alive_coverage, source_beams, batch_dims=1)  # (B, 2K, S)
            ended_scores += self.coverage * coverage_penalty(top_coverage, self.source_mask)
        ended_scores = tf.where(ends_here & ~frozen, ended_scores, NEG_INF)
        merged_scores = tf.concat([state["finished_scores"], ended_scores], axis=1)
        merged_tokens = tf.concat([state["finished_tokens"], top_sequences], axis=1)
        finished_scores, keep = tf.math.top_k(merged_scores, k=beam)
        finished_tokens = tf.gather(merged_tokens, keep, batch_dims=1)

        # The rest stay alive: the best K that did not produce EOS.
        dead = tf.equal(top_tokens, self.eos_id) | ends_here | frozen
        alive_candidates = tf.where(dead, NEG_INF, top_log_probs)
        alive_log_probs, keep = tf.math.top_k(alive_candidates, k=beam)
        alive_tokens = tf.gather(top_sequences, keep, batch_dims=1)
        parents = tf.gather(source_beams, keep, batch_dims=1)  # (B, K)
        flat_parents = tf.reshape(parents + tf.range(batch_size)[:, None] * beam, [-1])
        current = tf.reshape(tf.gather(top_tokens, keep, batch_dims=1), [-1])

        # A row is done once no alive hypothesis can beat its K-th finished one:
        # log-probabilities only fall, the length penalty is at most that of the
        # limit, and the coverage penalty is never above 0.
        best_alive_bound = alive_log_probs[:, 0] / self.best_possible_penalty
        done = done | at_limit[:, 0] | (finished_scores[:, -1] >= best_alive_bound)
        state = {
            "alive_tokens": alive_tokens,
            "alive_log_probs": alive_log_probs,
            "finished_tokens": finished_tokens,
            "finished_scores": finished_scores,
            "done": done,
        }
        if self.wants_attention:
            state["alive_coverage"] = tf.gather(top_coverage, keep, batch_dims=1)
        return current, state, flat_parents

    def finish(self, state):
        """The results dict (see the class docstring)."""
        tokens, lengths = strip_end(state["finished_tokens"], self.eos_id)
        return {"tokens": tokens, "lengths": lengths, "scores": state["finished_scores"]}
