"""Which kernels a decoding step should run: the measurements behind its choices.

Not part of the default run (`python -m bench kernels` asks for it). Graph mode, no
XLA, float32: what stock TF Serving runs. Each kernel is timed as 64 chained calls
inside one `tf.while_loop` (a call's output feeds the next call), so the executor's
per-op overhead counts as it does in a search.

- the output projection (B, M) → (B, V) logits: the kernel laid out (M, V) once per
  search (what `models.incremental` does) versus the tied embedding table (V, M)
  multiplied with `transpose_b` on every step, for V = 8,000.
- the feed-forward network of a step, matmul → SiLU → matmul, with SiLU as Keras
  writes it (x·sigmoid(x), which oneDNN fuses into one `_MklSwish` kernel) versus
  through tanh (`ops.activations`, what the step runs), batch 1 and 32.
- attention of one query over a 32-position cache (`attend_token`, i.e.
  `ops.attention.attend_one_query`: two `BatchMatMulV3`, TensorFlow's own Eigen
  kernel, around a softmax spelled exp(log_softmax)) versus two alternatives:
  elementwise products summed over D and L, and two `tf.matmul`s (BatchMatMulV2,
  which TensorFlow runs through oneDNN on CPUs with AVX-512 VNNI) around the fused
  softmax kernel; and a rejected candidate, those matmuls with softmax spelled as
  max/exp/sum/divide (bench/README.md).
- the key/value cache's layout in graph mode: caches that grow by a position per
  step (`SequenceSearch`'s default without XLA) versus caches preallocated for the
  longest row (XLA's layout), whole searches of the
  preset's model, greedy and beam 4, batch 1 and 32, for 32 tokens (the cache
  exactly as long as the output) and for the default limit of a 20-token source,
  20 + 50 = 70 tokens.
- a batch split in two parts at once (`SequenceSearch`'s default without XLA once
  each part gets 16 rows), as row groups of one search and as two searches, versus one
  search of the whole batch ("ours": the way `SequenceSearch` picks under this
  process's threads per op), greedy at batch 1
  and 16 (below that threshold: all run one search, so the rows show what deciding
  costs) and 32, beam 4 at batch 8 and 32, 32 tokens; and two callers each sending a
  batch of 32 at once, where the cores are already busy with the other's search.
- a greedy step against its floor: the step's matmuls alone (every projection with
  its bias, the feed-forward network, the layer norms and the output projection with
  its argmax, chained as in a step, with no attention, cache or search bookkeeping),
  on the preset's model at batch 1 and 32. The search's step is the slope of whole
  searches, (33 tokens - 1 token) / 32, so the encoder and the once-per-search
  preparation drop out. What no change to the step's other ops can beat: the
  decoding ratio's ceiling on this machine (bench/README.md).
- where a greedy step's time goes: kernel time per op type (`tf.profiler`) of a
  32-token greedy search with the preset's model, batch 1 and 32, per step (on 2
  cores two kernels may run at once, and the profiler adds its own cost, so the
  sum exceeds the step's wall time).
"""

import numpy as np

from bench.common import time_interleaved
from bench.decoding import random_translator
from bench.profile import kernel_times

CHAINED_CALLS = 64
VOCABULARY = 8000  # as in the decoding benchmark
CACHE_LENGTH = 32
NEW_TOKENS = 32
TOP_OPS = 8


def run(results, quick=False):
    import keras

    from keras_transformer.models import preset as make_preset

    options = results.options
    preset = options.get("preset", "small")
    precision = options.get("mixed_precision", "none")
    config = make_preset(preset)
    head_dim = config.d_model // config.num_heads
    repeats = 3 if quick else 7
    dtype = "float32" if precision == "none" else keras.mixed_precision.Policy(precision).compute_dtype
    for batch_size in (1, 32):
        _time_output_projection(results, batch_size, config.d_model, dtype, repeats)
    for batch_size in (1, 8, 32):
        _time_attention(results, batch_size, config.num_heads, head_dim, dtype, repeats)
    for batch_size in (1, 32):
        _time_feed_forward_activation(results, batch_size, config, dtype, repeats)
    _time_cache_layouts(results, preset, precision, repeats)
    _time_row_groups(results, preset, precision, repeats)
    _time_step_floor(results, preset, precision, repeats)
    _profile_greedy_step(results, preset, precision)


# One query per row and head: query (B, H, 1, D) already scaled, keys and values
# (B, H, L, D), mask broadcastable to (B, H, 1, L); each returns (B, H, 1, D), the same
# numbers (tests/bench/test_kernels.py), so only their speed differs.


def attend_as_the_step_does(query, keys, values, mask):
    """What `MultiHeadSelfAttention.attend_token` runs (`ops.attention.attend_one_query`):
    `BatchMatMulV3` (TensorFlow's Eigen kernel), softmax as exp(log_softmax)."""
    from keras_transformer.ops.attention import attend_one_query

    return attend_one_query(query, keys, values, mask)


def attend_by_products(query, keys, values, mask):
    """Elementwise products summed over D, then over L, softmax as exp(log_softmax):
    no matmul kernel, so no per-call kernel dispatch, but more passes over memory."""
    import tensorflow as tf

    from keras_transformer.ops.attention import attention_weights

    scores = tf.reduce_sum(query * keys, axis=-1)  # (B, H, L)
    weights = attention_weights(scores, mask[..., 0, :], fused_softmax=False)
    return tf.reduce_sum(weights[..., None] * values, axis=-2)[:, :, None, :]


def attend_by_batched_matmuls(query, keys, values, mask):
    """Two `tf.matmul`s (BatchMatMulV2, oneDNN's kernel on a CPU with AVX-512 VNNI)
    around the fused softmax kernel (`ops.attention.attention_weights`)."""
    import tensorflow as tf

    from keras_transformer.ops.attention import attention_weights

    weights = attention_weights(tf.matmul(query, keys, transpose_b=True), mask)
    return tf.matmul(tf.cast(weights, values.dtype), values)


def attend_with_spelled_out_softmax(query, keys, values, mask):
    """Candidate: the batched matmuls with softmax as max, exp, sum and divide."""
    import tensorflow as tf

    from keras_transformer.ops.attention import MASK_VALUE

    scores = tf.where(mask, tf.cast(tf.matmul(query, keys, transpose_b=True), tf.float32),
                      MASK_VALUE)
    exponentials = tf.exp(scores - tf.reduce_max(scores, axis=-1, keepdims=True))
    return tf.matmul(exponentials / tf.reduce_sum(exponentials, axis=-1, keepdims=True), values)


def _chained_seconds(kernels, first_input, repeats):
    """Median seconds per call of each `kernel(x) -> x`, 64 chained calls per graph run."""
    import tensorflow as tf

    def chained(kernel):
        @tf.function
        def calls():
            return tf.while_loop(
                lambda index, x: index < CHAINED_CALLS,
                lambda index, x: (index + 1, kernel(x)),
                (tf.constant(0), first_input),
            )[1]

        return lambda: calls().numpy()

    times = time_interleaved([chained(kernel) for kernel in kernels], repeats=repeats)
    return [seconds / CHAINED_CALLS for seconds in times]


def _time_output_projection(results, batch_size, d_model, dtype, repeats):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    table = tf.constant(rng.normal(size=(VOCABULARY, d_model)) * 0.05, dtype)  # (V, M)
    kernel = tf.transpose(table)  # (M, V), laid out once
    rows = tf.constant(rng.normal(size=(batch_size, d_model)), dtype)

    def next_rows(logits):
        # The logits' first M columns feed the next call: a chain, as in a search.
        return tf.tanh(logits[:, :d_model])

    seconds = _chained_seconds(
        [lambda x: next_rows(tf.matmul(x, kernel)),
         lambda x: next_rows(tf.matmul(x, table, transpose_b=True))],
        rows, repeats,
    )
    case = f"output projection ({d_model} → {VOCABULARY}), batch {batch_size}, {dtype}"
    results.add("kernels", case, "(V, M) table, transpose_b (before), per call",
                seconds[1] * 1e6, "µs")
    results.add("kernels", case, "(M, V) kernel laid out once (ours), per call",
                seconds[0] * 1e6, "µs", ratio=seconds[1] / seconds[0],
                baseline="(V, M) table with transpose_b")


def _time_feed_forward_activation(results, batch_size, config, dtype, repeats):
    import keras
    import tensorflow as tf

    from keras_transformer.ops.activations import silu_through_tanh

    rng = np.random.default_rng(0)
    width = config.intermediate_dim
    kernel = tf.constant(rng.normal(size=(config.d_model, width)) * 0.05, dtype)  # (M, F)
    back = tf.constant(rng.normal(size=(width, config.d_model)) * 0.05, dtype)  # (F, M)
    rows = tf.constant(rng.normal(size=(batch_size, config.d_model)), dtype)
    # The step's feed-forward network, matmul → SiLU → matmul, chained.
    seconds = _chained_seconds(
        [lambda x: tf.matmul(keras.activations.silu(tf.matmul(x, kernel)), back),
         lambda x: tf.matmul(silu_through_tanh(tf.matmul(x, kernel)), back)],
        rows, repeats,
    )
    case = f"feed-forward network ({config.d_model} → {width} → {config.d_model}), " \
           f"batch {batch_size}, {dtype}"
    results.add("kernels", case, "SiLU as x·sigmoid(x) (the fused _MklSwish), per call",
                seconds[0] * 1e6, "µs")
    results.add("kernels", case, "SiLU through tanh (the step's), per call",
                seconds[1] * 1e6, "µs", ratio=seconds[0] / seconds[1],
                baseline="x·sigmoid(x), fused")


def _time_attention(results, batch_size, num_heads, head_dim, dtype, repeats):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    shape = (batch_size, num_heads, CACHE_LENGTH, head_dim)
    keys = tf.constant(rng.normal(size=shape), dtype)
    values = tf.constant(rng.normal(size=shape), dtype)
    query = tf.constant(rng.normal(size=(batch_size, num_heads, 1, head_dim)), dtype)
    # Half the cache written, as in the middle of a search.
    mask = tf.constant(np.arange(CACHE_LENGTH) < CACHE_LENGTH // 2)[None, None, None, :]
    kernels = {
        "BatchMatMulV3, exp(log_softmax) (ours)": attend_as_the_step_does,
        "elementwise products, exp(log_softmax)": attend_by_products,
        "BatchMatMulV2, fused softmax": attend_by_batched_matmuls,
        "BatchMatMulV2, elementwise softmax (rejected)": attend_with_spelled_out_softmax,
    }
    seconds = _chained_seconds(
        [lambda q, kernel=kernel: kernel(q, keys, values, mask) for kernel in kernels.values()],
        query, repeats,
    )
    case = (f"attention of one query over {CACHE_LENGTH} keys, batch {batch_size}, "
            f"{num_heads} heads of {head_dim}, {dtype}")
    for index, (name, spent) in enumerate(zip(kernels, seconds)):
        ratio = None if index == 0 else seconds[0] / spent
        results.add("kernels", case, f"{name}, per call", spent * 1e6, "µs", ratio=ratio,
                    baseline=None if ratio is None else "ours (below 1: slower than ours)")


def _time_cache_layouts(results, preset, precision, repeats):
    from keras_transformer.decoding import SequenceSearch

    model = random_translator(preset, precision, vocab_size=VOCABULARY)
    never = 10**6  # an end token outside the vocabulary: every row runs to its limit
    rng = np.random.default_rng(0)
    source_length = 20
    for beam_width, method in ((1, "greedy"), (4, "beam_search")):
        searches = [
            SequenceSearch(model, eos_id=never, beam_width=beam_width, growing_cache=growing)
            for growing in (True, False)
        ]
        for batch_size in (1, 32):
            source = rng.integers(4, VOCABULARY, size=(batch_size, source_length)).astype("int32")
            # 32 new tokens: the preallocated cache is as long as the output; 0: the
            # default limit, source length + 50.
            for new_tokens in (NEW_TOKENS, 0):
                growing, preallocated = time_interleaved(
                    [lambda search=search: getattr(search, method)(source, new_tokens)[
                        "tokens"].numpy() for search in searches],
                    repeats=repeats,
                )
                tokens = new_tokens or source_length + searches[0].extra_length
                case = (f"{preset}, {'greedy' if beam_width == 1 else 'beam 4'}, batch "
                        f"{batch_size}, {tokens} tokens, {precision}")
                results.add("kernels", case, "caches preallocated for the longest row, per search",
                            preallocated * 1e3, "ms")
                results.add("kernels", case, "caches growing a position per step (ours), per search",
                            growing * 1e3, "ms", ratio=preallocated / growing,
                            baseline="preallocated caches")


def _time_row_groups(results, preset, precision, repeats):
    import threading

    from keras_transformer.decoding import SequenceSearch

    model = random_translator(preset, precision, vocab_size=VOCABULARY)
    never = 10**6  # an end token outside the vocabulary: every row runs NEW_TOKENS steps
    rng = np.random.default_rng(0)
    ways = {"two row groups at once": dict(parallel_searches=2, row_groups=True),
            "two searches at once": dict(parallel_searches=2, row_groups=False)}

    def searches(beam_width):
        return [SequenceSearch(model, max_length=NEW_TOKENS, eos_id=never, beam_width=beam_width,
                               **settings)
                for settings in [dict(parallel_searches=1), *ways.values()]]

    def at_once(decode, callers=2):
        threads = [threading.Thread(target=decode) for _ in range(callers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    for beam_width, method, batch_sizes in ((1, "greedy", (1, 16, 32)), (4, "beam_search", (8, 32))):
        made = searches(beam_width)
        default = SequenceSearch(model, max_length=NEW_TOKENS, beam_width=beam_width).row_groups
        names = [f"{name}{' (ours)' if settings['row_groups'] == default else ''}"
                 for name, settings in ways.items()]
        for batch_size in batch_sizes:
            source = rng.integers(4, VOCABULARY, size=(batch_size, 20)).astype("int32")
            decoders = [lambda search=search: getattr(search, method)(source, NEW_TOKENS)[
                "tokens"].numpy() for search in made]
            one, *split = time_interleaved(decoders, repeats=repeats)
            case = (f"{preset}, {'greedy' if beam_width == 1 else 'beam 4'}, batch {batch_size}, "
                    f"{NEW_TOKENS} tokens, {precision}")
            results.add("kernels", case, "one search of the batch, sentences/s", batch_size / one,
                        "sent/s")
            for name, seconds in zip(names, split):
                results.add("kernels", case, f"{name}, sentences/s", batch_size / seconds,
                            "sent/s", ratio=one / seconds, baseline="one search")
            if method == "greedy" and batch_size == 32:
                one, *split = time_interleaved(
                    [lambda decode=decode: at_once(decode) for decode in decoders], repeats=repeats
                )
                case += ", two callers at once"
                results.add("kernels", case, "one search a call, sentences/s",
                            2 * batch_size / one, "sent/s")
                for name, seconds in zip(names, split):
                    results.add("kernels", case, f"{name} a call, sentences/s",
                                2 * batch_size / seconds, "sent/s", ratio=one / seconds,
                                baseline="one search a call")


def matmul_floor_step(stack):
    """One step of a decoder's matmuls alone: (B, M) rows → the next rows.

    Args:
        stack: the model's `DecoderStack`.

    Returns:
        A function (B, M) → (B, M): every projection of `decode_token` with its
        bias, the feed-forward network, a layer norm after each sub-layer and the
        output projection with its argmax, the chosen rows' embeddings fed back;
        its kernels prepared once, as a search's (`start_decoder`).
    """
    import tensorflow as tf

    from keras_transformer.models.incremental import start_decoder

    _, state = start_decoder(stack, batch_size=1, max_length=1, grow=True)
    width = stack.d_model

    def dense(x, kernel, bias):
        x = tf.matmul(x, kernel)
        return x if bias is None else tf.nn.bias_add(x, bias)

    def add_and_norm(x, y):
        x = x + y
        centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
        variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
        return centered * tf.math.rsqrt(variance + 1e-6)

    def step(x):
        for block in state["weights"]:
            attentions = [block["self_attention"], block["cross_attention"]]
            for attention in filter(None, attentions):
                # The projection's first M columns stand in for the attention's output.
                projected = dense(x, attention["input_kernel"], attention["input_bias"])
                x = add_and_norm(x, dense(projected[:, :width], attention["output_kernel"],
                                          attention["output_bias"]))
            (inner, inner_bias, activation), (outer, outer_bias, _) = block["feed_forward"]
            hidden = activation(dense(x, inner, inner_bias))
            x = add_and_norm(x, dense(hidden, outer, outer_bias))
        if stack.output_norm is not None:
            x = stack.output_norm(x)
        logits = tf.matmul(x, state["output_kernel"])
        return tf.gather(state["embeddings"], tf.argmax(logits, axis=-1, output_type=tf.int32))

    return step


def _time_step_floor(results, preset, precision, repeats):
    import tensorflow as tf

    from keras_transformer.decoding import SequenceSearch

    model = random_translator(preset, precision, vocab_size=VOCABULARY)
    never = 10**6  # an end token outside the vocabulary: every row runs to its limit
    search = SequenceSearch(model, max_length=NEW_TOKENS + 1, eos_id=never)
    stack = model.decoder_stack
    step = matmul_floor_step(stack)
    rng = np.random.default_rng(0)
    for batch_size in (1, 32):
        source = rng.integers(4, VOCABULARY, size=(batch_size, 20)).astype("int32")
        rows = tf.constant(rng.normal(size=(batch_size, stack.d_model)), model.compute_dtype)
        floor = tf.function(lambda rows: tf.while_loop(
            lambda index, x: index < NEW_TOKENS, lambda index, x: (index + 1, step(x)),
            (tf.constant(0), rows))[1])
        one, many, floor_seconds = time_interleaved(
            [lambda: search.greedy(source, 1)["tokens"].numpy(),
             lambda: search.greedy(source, NEW_TOKENS + 1)["tokens"].numpy(),
             lambda: floor(rows).numpy()],
            repeats=repeats,
        )
        step_ms = (many - one) / NEW_TOKENS * 1e3
        floor_ms = floor_seconds / NEW_TOKENS * 1e3
        case = f"{preset}, greedy, batch {batch_size}, {precision}"
        results.add("kernels", case, "a step of the search ((33 tokens - 1 token) / 32)",
                    step_ms, "ms")
        results.add("kernels", case, "the step's matmuls alone (the floor)", floor_ms, "ms",
                    ratio=step_ms / floor_ms, baseline="the search's step")
        results.add("kernels", case, "once per search (encoder, preparation, 1 token)",
                    one * 1e3, "ms")


def _profile_greedy_step(results, preset, precision):
    from keras_transformer.decoding import SequenceSearch

    model = random_translator(preset, precision, vocab_size=VOCABULARY)
    never = 10**6  # an end token outside the vocabulary: every row runs NEW_TOKENS steps
    search = SequenceSearch(model, max_length=NEW_TOKENS, eos_id=never)
    rng = np.random.default_rng(0)
    for batch_size in (1, 32):
        source = rng.integers(4, VOCABULARY, size=(batch_size, 20)).astype("int32")
        decode = lambda: search.greedy(source, NEW_TOKENS)["tokens"].numpy()  # noqa: E731
        decode()  # traced before the profile
        times = kernel_times(decode, calls=3)
        case = f"{preset}, greedy, batch {batch_size}, {precision}"
        results.add("kernels", case, "kernel time, all ops", sum(times.values()) / NEW_TOKENS,
                    "ms per step")
        for op_type, milliseconds in times.most_common(TOP_OPS):
            results.add("kernels", case, f"kernel time: {op_type}", milliseconds / NEW_TOKENS,
                        "ms per step")
