"""The one decoding loop: a `tf.while_loop` over the one-token step, driven by a strategy.

Shape notation: B batch, R rows the step runs (B, or B·K for a beam of width K),
L output positions, V vocabulary, S source length.

As OpenNMT-tf's `dynamic_decode` takes a decoding strategy and a sampler, `decode`
runs any step function (`Seq2SeqTransformer.decode_token` or
`LanguageModel.decode_token`, bound to what `start_decoding` prepared) under a
strategy (`keras_transformer.decoding.strategies`: `GreedySearch` with a sampler
from `keras_transformer.decoding.samplers`, or `BeamSearch`). The loop owns what
every strategy shares: the step, the next-token log-probabilities (padding and the
start token never chosen), the cache (reordered when a beam moves hypotheses) and
the stop rule (all rows done, or L steps). The strategy owns the choice of tokens
and what it keeps; it returns its own results.

Without XLA the caches may grow by a position per step: the loop then gives them
free lengths (`cache_shape`, `keras_transformer/ops/cache.py`'s `growing_shape`), and
it may drop done rows from the step (`drop_done_rows`).
Under XLA every distinct input width is a compilation of the whole search, so
sources and prompts are padded to one of a few widths first (`pad_to_static_width`).
"""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.ops.cache import BATCH_AXIS

# "Minus infinity" for scores: finite, so sums and differences never give NaN.
NEG_INF = -1e9

# The narrowest of the widths XLA searches are compiled for (`static_widths`).
FIRST_STATIC_WIDTH = 8


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


def ban_tokens(log_probs, token_ids):
    """(R, V) log-probabilities with `token_ids` set to about `NEG_INF` (not renormalised)."""
    for token_id in token_ids:
        banned = tf.equal(tf.range(tf.shape(log_probs)[-1]), token_id)
        log_probs = tf.where(banned, tf.constant(NEG_INF, log_probs.dtype), log_probs)
    return log_probs


def strip_end(tokens, eos_id, where=None):
    """Replaces EOS and everything after it by PAD; returns (tokens, lengths).

    `where`: optional booleans like `tokens`, True where an EOS counts (elsewhere
    it is kept as a token, as in a prompt).
    """
    ends = tf.equal(tokens, eos_id)
    if where is not None:
        ends &= where
    ended = tf.cumsum(tf.cast(ends, tf.int32), axis=-1) > 0
    tokens = tf.where(ended, tf.zeros_like(tokens), tokens)
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(tokens, PAD_ID), tf.int32), axis=-1)
    return tokens, lengths


def static_widths(cap):
    """The widths an XLA search pads its (B, W) inputs of up to `cap` positions to.

    Powers of two from `FIRST_STATIC_WIDTH`, then `cap`: an input of W positions
    pays for at most 2·W (its encoder pass, each step's cross-attention), and a
    batch size compiles at most log2(cap / 8) + 2 times, where every new width
    would compile once more (seconds each).

    Args:
        cap: the widest input padded (the model's position table).

    Returns:
        Ascending list of ints, the last `cap`.
    """
    cap = int(cap)
    widths, width = [], FIRST_STATIC_WIDTH
    while width < cap:
        widths.append(width)
        width *= 2
    return widths + [cap]


def pad_to_static_width(tokens, cap):
    """(B, W) ids right-padded with PAD_ID to (B, W'), W' the first of
    `static_widths(cap)` that is at least W (W itself when W > `cap`)."""
    width = tf.shape(tokens)[1]
    widths = tf.constant(static_widths(cap), tf.int32)
    narrowest = tf.reduce_min(tf.where(widths >= width, widths, tf.int32.max))
    target = tf.minimum(narrowest, tf.maximum(width, int(cap)))
    return tf.pad(tokens, [[0, 0], [0, target - width]], constant_values=PAD_ID)


def longest(lengths):
    """The largest of the int32 `lengths` (any shape); 0 when there are none.

    `tf.reduce_max` of no values is the dtype's minimum, which as a length makes
    an empty batch fail (`tf.range`, `tf.zeros`) instead of giving empty results.
    """
    return tf.maximum(tf.reduce_max(lengths), 0)


@dataclasses.dataclass
class Rows:
    """What a strategy is told about the batch it decodes.

    Attributes:
        start_tokens: (B,) int32, the token fed at the first step.
        limits: (B,) int32, the most output tokens each row may produce.
        length: L, the output positions kept (a scalar int or tensor; also the most
            steps the loop runs).
        prompts: optional (B, L) int32 tokens to force: row b's output position i
            is `prompts[b, i]` while i < `prompt_lengths[b]`, whatever the step
            predicts (the language model's prompt after its first token).
        prompt_lengths: (B,) int32 forced positions of each row (with `prompts`).
        source_mask: optional (B, S) booleans, True for real source tokens (beam
            search's coverage penalty reads it).
    """

    start_tokens: object
    limits: object
    length: object
    prompts: object = None
    prompt_lengths: object = None
    source_mask: object = None


def gather_rows(cache, parents):
    """Every tensor of the `cache` nest with row r taken from row `parents[r]`
    (along `BATCH_AXIS`): the cache after a beam moved its hypotheses."""
    return tf.nest.map_structure(lambda tensor: tf.gather(tensor, parents, axis=BATCH_AXIS), cache)


def decode(step, strategy, rows, cache, cache_shape=None, bos_id=BOS_ID, banned=(),
           reorder=None, row_inputs=None):
    """Runs `strategy` over `step` until every row is done or L steps have run.

    Args:
        step: `step(tokens, index, cache, **kwargs) -> (logits, cache)`: (R,) int32
            tokens at position `index` → (R, V) logits of the next token and the
            updated cache; called with `return_cross_attention=True` when the
            strategy wants the (R, S) cross-attention, and then also returns it;
            with `row_inputs`, called as `step(tokens, index, cache, row_inputs)`.
        strategy: a `GreedySearch` or `BeamSearch`.
        rows: the batch's `Rows`.
        cache: the step's cache (any nest of tensors whose axis `BATCH_AXIS` holds
            rows), from `start_decoding`.
        cache_shape: None for a cache of fixed shape; for one that changes shape from
            step to step, a function from each cache tensor to its `tf.while_loop`
            shape invariant (`growing_shape` for a growing key/value cache).
        bos_id: the start token, never chosen (as padding).
        banned: more token ids never chosen, e.g. the unknown piece for generation.
        reorder: `reorder(cache, parents) -> cache`, the cache with row r taken from
            row `parents[r]` when the strategy moves hypotheses (None: `gather_rows`;
            a step that runs row groups passes the model's `reorder_cache`).
        row_inputs: None, or a nest of tensors fixed for the search whose axis 0
            holds rows (the source's cross-attention keys, values and mask). Given,
            the step runs only on the rows still decoding (`drop_done_rows`): the
            loop drops a row's cache and inputs once the strategy says it is done,
            which needs a cache of free batch size (`cache_shape`).

    Returns:
        The strategy's results (`strategy.finish`).
    """
    if row_inputs is not None:
        return drop_done_rows(step, strategy, rows, cache, cache_shape, bos_id, banned,
                              row_inputs)
    current, state = strategy.start(rows)
    wants_attention = strategy.wants_attention
    reorder_cache = reorder or gather_rows

    def condition(index, current, cache, state):
        return tf.logical_not(strategy.all_done(state))

    def body(index, current, cache, state):
        if wants_attention:
            logits, cache, attention = step(current, index, cache, return_cross_attention=True)
        else:
            (logits, cache), attention = step(current, index, cache), None
        log_probs = ban_tokens(next_token_log_probs(logits, bos_id=bos_id), banned)
        current, state, parents = strategy.step(index, log_probs, state, attention)
        if parents is not None:  # (R,) row each new row continues
            cache = reorder_cache(cache, parents)
        return index + 1, current, cache, state

    loop_vars = (tf.constant(0), current, cache, state)
    shapes = None
    if cache_shape is not None:
        shapes = (_fixed(loop_vars[0]), _fixed(current),
                  tf.nest.map_structure(cache_shape, cache), _fixed(state))
    _, _, _, state = tf.while_loop(
        condition, body, loop_vars, shape_invariants=shapes, maximum_iterations=rows.length
    )
    return strategy.finish(state)


def _fixed(value):
    """The shapes of a nest of tensors, as `tf.while_loop` invariants."""
    return tf.nest.map_structure(lambda tensor: tensor.shape, value)


def _free_rows(tensor):
    """A tensor's shape with a free axis 0, as a `tf.while_loop` invariant."""
    return tf.TensorShape([None]).concatenate(tensor.shape[1:])


def _slots(active, all_rows):
    """(R,) int32: each active row's position in `active` (A,), 0 for the others
    (`all_rows`: the (R,) row numbers)."""
    return tf.tensor_scatter_nd_update(tf.zeros_like(all_rows), active[:, None],
                                       tf.range(tf.size(active)))


def drop_done_rows(step, strategy, rows, cache, cache_shape, bos_id, banned, row_inputs):
    """`decode` whose step runs only on the rows still decoding.

    A batch decodes for as many steps as its longest output; in the demo's test
    sentences, batches of 32, the mean output is 0.57–0.72 of the longest, so done
    rows kept in the step would take a third of its matmuls or more. The strategy
    keeps every row's state, and a done row's (frozen) scores come from any active
    row's. The step's cache and `row_inputs` keep the A active rows (`active`,
    ascending) and are gathered only when rows end, or, for a beam, with its every
    move, which gathers the cache anyway. A row decodes the same whether others ran
    beside it.

    Args: as `decode`'s (`cache_shape` must free the cache's batch axis).

    Returns:
        The strategy's results (`strategy.finish`).
    """
    current, state = strategy.start(rows)
    wants_attention = strategy.wants_attention
    num_rows = tf.shape(current)[0]
    all_rows = tf.range(num_rows)

    def condition(index, current, cache, state, active, slots, row_inputs):
        return tf.logical_not(strategy.all_done(state))

    def body(index, current, cache, state, active, slots, row_inputs):
        tokens = tf.gather(current, active)
        if wants_attention:
            logits, cache, attention = step(tokens, index, cache, row_inputs,
                                            return_cross_attention=True)
        else:
            (logits, cache), attention = step(tokens, index, cache, row_inputs), None
        log_probs = ban_tokens(next_token_log_probs(logits, bos_id=bos_id), banned)  # (A, V)
        some_done = tf.size(active) < num_rows

        def every_row(x):  # (A, ...) → (R, ...), a done row reading the first active row's
            return tf.cond(some_done, lambda: tf.gather(x, slots), lambda: x)

        if wants_attention:
            attention = every_row(attention)
        current, state, parents = strategy.step(index, every_row(log_probs), state, attention)
        still = tf.logical_not(strategy.rows_done(state))  # (R,)
        ends_now = tf.reduce_any(tf.logical_not(tf.gather(still, active)))
        moves = parents is not None

        def drop():  # one branch for all the gathers: a step with no row ending runs none
            kept = tf.cast(tf.where(still)[:, 0], tf.int32)  # (A',) ascending
            sources = tf.gather(slots, kept)  # their rows' positions in the last step's
            gathered = tf.nest.map_structure(lambda x: tf.gather(x, sources), row_inputs)
            kept_cache = () if moves else gather_rows(cache, sources)
            return kept, _slots(kept, all_rows), gathered, kept_cache

        new_active, new_slots, row_inputs, dropped = tf.cond(
            ends_now, drop, lambda: (active, slots, row_inputs, () if moves else cache))
        # A beam gathers its cache at every move: each kept row's is its parent's.
        if moves:
            cache = gather_rows(cache, tf.gather(slots, tf.gather(parents, new_active)))
        else:
            cache = dropped
        return index + 1, current, cache, state, new_active, new_slots, row_inputs

    loop_vars = (tf.constant(0), current, cache, state, all_rows, all_rows, row_inputs)
    shapes = (_fixed(loop_vars[0]), _fixed(current), tf.nest.map_structure(cache_shape, cache),
              _fixed(state), tf.TensorShape([None]), _fixed(all_rows),
              tf.nest.map_structure(_free_rows, row_inputs))
    state = tf.while_loop(
        condition, body, loop_vars, shape_invariants=shapes, maximum_iterations=rows.length
    )[3]
    return strategy.finish(state)
