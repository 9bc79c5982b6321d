"""Decoding speed: the cached search versus the TensorFlow tutorial's uncached loop.

Sentences per second at batch 1 and 32, exactly `new_tokens` tokens each (an end
token the model never produces makes every row run to the limit), greedy, on one
model with random weights. The baseline reruns the whole model on the full prefix
at every step, as the tutorial's `Translator` does. Beam 4 (with its default
coverage penalty) is reported relative to greedy, and beam 4 without the penalty
(`coverage=0`) relative to beam 4 with it; in graph mode, searches that drop done
rows from their step relative to ones that keep them (`_time_dropping_done_rows`).
Ops per step: the nodes of the decoding loop's body (the `FunctionDef` of the `While`
op's body in the traced graph, with the functions it calls), i.e. what the graph
executor schedules for every generated token.
"""

import collections

import numpy as np

from bench.common import jit_modes
from bench.common import rounds_for_batch
from bench.common import time_interleaved


def run(results, quick=False, preset=None, new_tokens=32, source_length=20, batch_sizes=(1, 32),
        jit=None):
    """Adds the decoding rows to `results`.

    `preset`, `jit` and the precision default to the command line's options
    (`results.options`: preset, xla "on"/"off"/"both", mixed_precision).
    """
    options = results.options
    preset = preset or options.get("preset", "small")
    if jit is None:
        modes = jit_modes(options, default="off")
    else:
        modes = (jit,)
    precision = options.get("mixed_precision", "none")
    repeats = 3 if quick else 5
    for jit_mode in modes:
        _run(results, preset, new_tokens, source_length, batch_sizes, jit_mode, precision,
             repeats)


def loop_op_counts(search, method):
    """Counts the ops of one step of each `SequenceSearch` loop, by op type.

    Args:
        search: a `SequenceSearch`.
        method: "greedy" or "beam_search".

    Returns:
        A list of `collections.Counter`s of op types, one per `While` body (with
        the functions it calls) in the traced search: the whole batch's loop, and
        the one that drops done rows (`drop_done_rows`) and the row groups' loop
        (`parallel_searches` > 1, `row_groups`) where the search has them.
    """
    graph_def = search.concrete_function(method).graph.as_graph_def()
    library = {function.signature.name: function for function in graph_def.library.function}

    def visit(name, counts):
        for node in library[name].node_def:
            counts[node.op] += 1
            for value in node.attr.values():
                if value.func.name in library:
                    visit(value.func.name, counts)
        return counts

    return [visit(node.attr["body"].func.name, collections.Counter())
            for function in library.values() for node in function.node_def
            if node.op in ("While", "StatelessWhile")]


def step_op_counts(search, method):
    """Counts the ops of the whole batch's step (what a batch of one sentence runs), by
    op type: of the search's loops (`loop_op_counts`), the one with the fewest ops,
    since the others add the dropping of done rows or run the blocks once per group."""
    bodies = loop_op_counts(search, method)
    expected = (1 + search.drop_done_rows
                + (search.parallel_searches > 1 and search.row_groups))
    if len(bodies) != expected:
        raise RuntimeError(f"expected {expected} decoding loops in the {method} graph, "
                           f"found {len(bodies)}")
    return min(bodies, key=lambda counts: sum(counts.values()))


def random_translator(preset, precision, vocab_size=8000):
    """The preset's translator with seeded random weights, built under `precision`
    ("none" is float32), the global dtype policy restored after."""
    import keras

    from keras_transformer.models import build_transformer

    keras.utils.set_random_seed(0)
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32" if precision == "none" else precision)
    try:
        return build_transformer(
            preset, source_vocab_size=vocab_size, target_vocab_size=vocab_size
        )
    finally:
        keras.config.set_dtype_policy(previous)


def _run(results, preset, new_tokens, source_length, batch_sizes, jit, precision, repeats):
    from bench.uncached import make_uncached_greedy
    from keras_transformer.decoding import SequenceSearch

    model = random_translator(preset, precision)
    never = 10**6  # an end token outside the vocabulary: every row decodes new_tokens
    greedy = SequenceSearch(model, max_length=new_tokens, eos_id=never, jit_compile=jit)
    beam = SequenceSearch(model, max_length=new_tokens, eos_id=never, beam_width=4, jit_compile=jit)
    uncovered = SequenceSearch(model, max_length=new_tokens, eos_id=never, beam_width=4,
                               coverage=0.0, jit_compile=jit)
    uncached = make_uncached_greedy(model, max_length=new_tokens, eos_id=never)
    label = (f"{preset}" + (", XLA" if jit else "")
             + ("" if precision == "none" else f", {precision}"))
    for name, search, method in (("greedy", greedy, "greedy"), ("beam 4", beam, "beam_search"),
                                 ("beam 4 without coverage penalty", uncovered, "beam_search")):
        counts = step_op_counts(search, method)
        constants = sum(counts[op] for op in ("Const", "Identity", "NoOp"))
        results.add("decoding", label, f"ops per step, {name} (loop body nodes)",
                    sum(counts.values()), "ops")
        results.add("decoding", label, f"ops per step, {name}, without Const/Identity",
                    sum(counts.values()) - constants, "ops")
    rng = np.random.default_rng(0)
    label = (f"{preset}, {new_tokens} tokens" + (", XLA" if jit else "")
             + ("" if precision == "none" else f", {precision}"))
    # The uncached loop's prefix grows every step: it runs without XLA in both modes.
    baseline_name = "greedy sentences/s (uncached tutorial loop" + (", no XLA)" if jit else ")")
    for batch_size in batch_sizes:
        source = rng.integers(4, 8000, size=(batch_size, source_length)).astype("int32")
        ours, baseline, beam_time, uncovered_time = time_interleaved(
            [
                lambda: greedy.greedy(source, new_tokens)["tokens"].numpy(),
                lambda: uncached(source).numpy(),
                lambda: beam.beam_search(source, new_tokens)["tokens"].numpy(),
                lambda: uncovered.beam_search(source, new_tokens)["tokens"].numpy(),
            ],
            repeats=rounds_for_batch(batch_size, repeats),
        )
        case = f"{label}, batch {batch_size}"
        results.add("decoding", case, baseline_name, batch_size / baseline, "sent/s")
        results.add("decoding", case, "greedy sentences/s (cached, ours)", batch_size / ours,
                    "sent/s", ratio=baseline / ours, baseline="uncached tutorial loop")
        results.add("decoding", case, "beam 4 sentences/s (cached, ours)", batch_size / beam_time,
                    "sent/s", ratio=ours / beam_time, baseline="our greedy (cost of beam 4)")
        results.add("decoding", case, "beam 4 sentences/s without the coverage penalty",
                    batch_size / uncovered_time, "sent/s", ratio=beam_time / uncovered_time,
                    baseline="beam 4 with it, the default (what the penalty costs)")
    if not jit:
        _time_dropping_done_rows(results, model, label, new_tokens, source_length, repeats)


def _time_dropping_done_rows(results, model, label, new_tokens, source_length, repeats,
                             batch_size=32):
    """Searches that drop done rows from their step against ones that keep them, split
    as exports split a batch (two searches), interleaved: a batch whose rows end at
    spread steps (each row's limit is its source length + 2, the sources 1 to
    `source_length` + 10 tokens long, so the mean limit is about 0.55 of the longest;
    the demo's test outputs give 0.57–0.72 in batches of 32), and one whose rows all
    end together, where only the dropping's bookkeeping shows."""
    from keras_transformer.decoding import SequenceSearch

    never = 10**6
    longest = source_length + 10
    rng = np.random.default_rng(1)
    spread = np.zeros((batch_size, longest), "int32")
    for row, length in enumerate(rng.integers(1, longest + 1, size=batch_size)):
        spread[row, :length] = rng.integers(4, 8000, size=length)
    even = rng.integers(4, 8000, size=(batch_size, longest)).astype("int32")
    for name, method, beam_width in (("greedy", "greedy", 1), ("beam 4", "beam_search", 4)):
        dropping, keeping = (
            SequenceSearch(model, max_length=new_tokens, extra_length=2, eos_id=never,
                           beam_width=beam_width, row_groups=False, drop_done_rows=drop)
            for drop in (True, False))
        calls = []
        for source in (spread, even):
            calls += [lambda s=search, x=source: getattr(s, method)(x)["tokens"].numpy()
                      for search in (dropping, keeping)]
        times = time_interleaved(calls, repeats=rounds_for_batch(batch_size, repeats))
        for (kind, drop_time, keep_time) in (("rows ending at spread steps", *times[:2]),
                                             ("rows all ending together", *times[2:])):
            results.add("decoding", f"{label}, batch {batch_size}, two searches, {kind}",
                        f"{name} sentences/s, done rows dropped from the step",
                        batch_size / drop_time, "sent/s", ratio=keep_time / drop_time,
                        baseline="done rows kept in the step")
