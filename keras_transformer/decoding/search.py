"""Greedy and beam search over a `Seq2SeqTransformer`, with the key/value cache.

Shape notation: B batch, S source length, K beam width, L maximum output length,
V target vocabulary.

Each search is built once per `SequenceSearch` and reused, as graph functions
(`graph_function`; an eager call of one sentence traces only the loop it runs): the
one decoding loop (`keras_transformer.decoding.loop.decode`) under
`GreedySearch` or `BeamSearch`, which computes only the newest position per step
(the decoder's self-attention reads the cache; the encoder output and the
cross-attention keys/values are computed once per sentence). It runs with XLA
(`jit_compile=True`, shapes static: the cache holds `max_length` positions, and
sources are padded to one of a few widths, `loop.static_widths`, so that a batch
size compiles a handful of times, not once per source length) or without (stock TF
Serving): the cache then starts empty and grows by a position per step
(`keras_transformer/ops/cache.py`).

Every row gets its own length limit (its real source length + `extra_length`,
capped at `max_length`, or the caller's `max_new_tokens`), and finished rows are
frozen, so a sentence decodes the same alone and in a batch. Without XLA a batch of
several sentences also drops its done rows from the step (`drop_done_rows`): its
matmuls run on the rows still decoding.

Without XLA a large batch's rows are split into `parallel_searches` parts of whole
sentences that run at once, one a core: a step's ops are too small for TensorFlow to
spread one over several cores (intra-op threads), but independent ops run side by
side on the inter-op threads. Rows are independent, so the output is unchanged. Two
ways, each the faster under one thread setting (`docs/experiments.md`, "Speed"):

- row groups (`row_groups=True`): one search whose step runs the decoder blocks on
  every part at once (`keras_transformer/models/incremental.py`), then the output
  projection, the vocabulary's log-probabilities and the strategy once on all rows.
  With TensorFlow's default threads per op those ops spread over the threads; as
  independent searches, each would wait for threads busy with the other's.
- searches (`row_groups=False`): each part searched by its own loop, all at once.
  With one thread per op (`--tensorflow_intra_op_parallelism=1`, what `serving/`
  runs) nothing is spread, and independent searches share nothing.
"""

import functools

import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE
from keras_transformer.constants import EOS_ID
from keras_transformer.constants import MIN_GROUP_ROWS
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding.loop import Rows
from keras_transformer.decoding.loop import decode
from keras_transformer.decoding.loop import longest
from keras_transformer.decoding.loop import pad_to_static_width
from keras_transformer.decoding.strategies import BeamSearch
from keras_transformer.decoding.strategies import GreedySearch
from keras_transformer.ops import checks
from keras_transformer.ops.cache import growing_shape
from keras_transformer.ops.graph import graph_function


def _trim(result):
    """Cuts the (..., L) tokens to the longest hypothesis produced."""
    return {**result, "tokens": result["tokens"][..., : longest(result["lengths"])]}


def group_sizes(batch_size, rows_per_sentence, groups):
    """Whether a batch is split into `groups` consecutive groups of sentences (row
    groups of one search, or searches: `SequenceSearch`), and their sizes.

    Args:
        batch_size: B, a scalar int (tensor).
        rows_per_sentence: rows a sentence takes in the search (K for beam search).
        groups: G.

    Returns:
        `(split, sizes)`: a bool scalar, true when every group gets `MIN_GROUP_ROWS`
        rows or more, and (G,) int32 sentences per group, the first B % G one more.
    """
    batch_size = tf.convert_to_tensor(batch_size, tf.int32)
    split = batch_size * rows_per_sentence >= groups * MIN_GROUP_ROWS
    sizes = batch_size // groups + tf.cast(tf.range(groups) < batch_size % groups, tf.int32)
    return split, sizes


def _concat_rows(results):
    """Joins trimmed results of consecutive row parts, padding tokens to the longest."""
    widest = tf.reduce_max(tf.stack([tf.shape(result["tokens"])[-1] for result in results]))

    def pad(tokens):
        padding = [[0, 0]] * (tokens.shape.rank - 1) + [[0, widest - tf.shape(tokens)[-1]]]
        return tf.pad(tokens, padding)

    return {
        key: tf.concat(
            [pad(result[key]) if key == "tokens" else result[key] for result in results], axis=0
        )
        for key in results[0]
    }


def row_groups_by_default():
    """Whether a search splits a large batch as row groups rather than as searches:
    unless this process runs one thread per op (`tf.config.threading`), the setting
    under which independent searches are faster."""
    return tf.config.threading.get_intra_op_parallelism_threads() != 1


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
        parallel_searches: P, parts of whole sentences a batch's rows are split
            into, run at once, one a core (None: 2 without XLA, 1 with it); a batch is
            split only when every part gets `MIN_GROUP_ROWS` rows (sentences x K) or
            more. 1 never splits.
        row_groups: split as row groups of one search (True) or as independent
            searches (False); None: `row_groups_by_default()`, decided when the
            search is made (the module's docstring compares them).
        drop_done_rows: with a growing cache, run each step on the rows still
            decoding only (`keras_transformer.decoding.loop.drop_done_rows`), in every
            search that is not split in row groups; the output is unchanged.
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
        row_groups=None,
        drop_done_rows=True,
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
                "`parallel_searches` > 1 needs `jit_compile=False`: an XLA loop runs its ops "
                f"one after another; received parallel_searches={parallel_searches}, "
                "jit_compile=True."
            )
        self.row_groups = row_groups_by_default() if row_groups is None else bool(row_groups)
        self.drop_done_rows = bool(drop_done_rows) and self.growing_cache
        self.bos_id = int(bos_id)
        self.eos_id = int(eos_id)
        signature = [
            tf.TensorSpec([None, None], tf.int32, name="encoder_tokens"),
            tf.TensorSpec([], tf.int32, name="max_new_tokens"),
        ]
        # One traced encoder that every loop calls, rather than one traced per loop
        # (about half a loop's tracing time).
        self._encode = graph_function(self.model.encode, input_signature=signature[:1])
        # The loops may be XLA-compiled; trimming the output to its longest row is a
        # dynamic shape, so it happens in an outer graph function, as the choice
        # between the loops: "whole" runs a batch as it is, "drops" drops done rows
        # from its step, "groups" runs row groups.
        loop_kinds = {"whole": {}}
        if self.drop_done_rows:
            loop_kinds["drops"] = {"drops": True}
        if self.parallel_searches > 1 and self.row_groups:
            loop_kinds["groups"] = {"groups": self.parallel_searches}

        def searches(make_strategy):
            loops = {
                kind: graph_function(
                    functools.partial(self._search_loop, make_strategy, **options),
                    input_signature=signature, jit_compile=self.jit_compile,
                )
                for kind, options in loop_kinds.items()
            }
            rows_per_sentence = make_strategy().rows_per_sentence
            # By the batch's sentences: "one" and "many" for eager calls of a known batch
            # size, which then trace only the loops that size runs; "any" in a graph.
            return {
                sentences: graph_function(
                    functools.partial(self._in_groups, loops, rows_per_sentence,
                                      sentences=sentences),
                    input_signature=signature,
                )
                for sentences in ("one", "many", "any")
            }

        self._greedy = searches(self._greedy_strategy)
        self._beam = searches(self._beam_strategy)

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
        return self._call(self._greedy, encoder_tokens, max_new_tokens)

    def beam_search(self, encoder_tokens, max_new_tokens=0):
        """Beam search of width K with GNMT's length and coverage penalties.

        Returns:
            dict with "tokens" (B, K, L), "lengths" (B, K) and "scores" (B, K):
            log-probability / length_penalty (+ β · coverage_penalty), hypotheses
            sorted best first.
        """
        return self._call(self._beam, encoder_tokens, max_new_tokens)

    def run(self, strategy, encoder_tokens, max_new_tokens=0):
        """Any strategy over this model's step, e.g. sampling a translation.

        Runs as called (eagerly, or inside the caller's `tf.function`), on the
        whole batch; `greedy` and `beam_search` are the compiled searches, which split a
        large batch (`parallel_searches`).

        Args:
            strategy: a fresh `GreedySearch` (with any sampler) or `BeamSearch`.
            encoder_tokens: (B, S) int32 source ids, 0-padded.
            max_new_tokens: per-call limit on output tokens; 0 = the default rule.

        Returns:
            The strategy's results, tokens cut to the longest output.

        Example:
            >>> sampler = RandomSampler(temperature=[0.7], top_k=[0], top_p=[0.9], seeds=[3])
            >>> search.run(GreedySearch(sampler), source_ids)["tokens"]  # (1, L)
        """
        encoder_tokens = tf.cast(encoder_tokens, tf.int32)
        limit = tf.constant(max_new_tokens, tf.int32)
        # As the compiled searches: one sentence has no row to drop.
        drops = self.drop_done_rows and encoder_tokens.shape[0] != 1
        return _trim(self._search(strategy, encoder_tokens, limit, drops=drops))

    def concrete_function(self, method="greedy"):
        """The traced graph function of `greedy` or `beam_search` (to inspect its ops)."""
        functions = {"greedy": self._greedy, "beam_search": self._beam}
        if method not in functions:
            raise ValueError(f"`method` must be one of {sorted(functions)}; received {method!r}.")
        return functions[method]["any"].get_concrete_function()

    # Shared pieces -------------------------------------------------------------

    @staticmethod
    def _call(functions, encoder_tokens, max_new_tokens):
        """Calls the search for the batch: an eager batch of known size picks the
        function for one sentence or many, a symbolic one the function for any."""
        encoder_tokens = tf.cast(encoder_tokens, tf.int32)
        sentences = "any"
        if tf.executing_eagerly() and encoder_tokens.shape[0] is not None:
            sentences = "one" if encoder_tokens.shape[0] == 1 else "many"
        return functions[sentences](encoder_tokens, tf.constant(max_new_tokens, tf.int32))

    def _in_groups(self, loops, rows_per_sentence, encoder_tokens, max_new_tokens,
                   sentences="any"):
        """Runs the batch in one of its `loops` (by kind: "whole", "drops", "groups"),
        or, when `group_sizes` says so, split in `parallel_searches` parts: the row
        groups' loop or one loop on each part at once; returns the trimmed output.
        `sentences`: "one" or "many" when the batch is known to hold one sentence or
        more, "any" to choose in the graph."""
        if self.jit_compile:
            # Padding the source changes no row: its length, mask and limit count
            # real tokens only.
            encoder_tokens = pad_to_static_width(encoder_tokens, self.model.config.max_length)

        def run(kind, tokens):
            return _trim(loops[kind](tokens, max_new_tokens))

        batch_size = tf.shape(encoder_tokens)[0]
        # One sentence has no row to drop: the plain loop's step has fewer ops.
        many = "drops" if "drops" in loops else "whole"
        if sentences == "one":
            return run("whole", encoder_tokens)  # too few rows to split

        def whole():
            if sentences == "many" or many == "whole":
                return run(many, encoder_tokens)
            return tf.cond(batch_size > 1, lambda: run(many, encoder_tokens),
                           lambda: run("whole", encoder_tokens))

        if self.parallel_searches == 1:
            return whole()
        split, sizes = group_sizes(batch_size, rows_per_sentence, self.parallel_searches)

        def in_searches():
            parts = tf.split(encoder_tokens, sizes, num=self.parallel_searches)
            # Independent calls: the executor runs them on the inter-op threads at once.
            return _concat_rows([run(many, part) for part in parts])

        if "groups" in loops:
            return tf.cond(split, lambda: run("groups", encoder_tokens), whole)
        return tf.cond(split, in_searches, whole)

    def _row_limits(self, encoder_tokens, max_new_tokens):
        """(B,) output-length limit of each row, and the cache length L."""
        source_lengths = tf.reduce_sum(tf.cast(tf.not_equal(encoder_tokens, PAD_ID), tf.int32), -1)
        default = source_lengths + self.extra_length
        limits = tf.where(max_new_tokens > 0, tf.fill(tf.shape(default), max_new_tokens), default)
        limits = tf.clip_by_value(limits, 1, self.max_length)
        if self.jit_compile:
            return limits, self.max_length  # XLA needs a static cache shape.
        return limits, longest(limits)

    def _search(self, strategy, encoder_tokens, max_new_tokens, groups=1, drops=False):
        """Runs `strategy` on the batch in the one decoding loop, the step's blocks
        on `groups` row groups (`group_sizes`), or, with `drops`, on the rows still
        decoding only (row groups hold fixed row counts, so they drop nothing)."""
        encoder_outputs, encoder_mask = self._encode(encoder_tokens)
        limits, length = self._row_limits(encoder_tokens, max_new_tokens)
        rows_per_sentence = strategy.rows_per_sentence
        sizes = None
        if groups > 1:
            _, sentences = group_sizes(tf.shape(encoder_tokens)[0], rows_per_sentence, groups)
            sizes = tf.unstack(sentences * rows_per_sentence, num=groups)
        # Everything fixed for the search (fused kernels, source mask, cross-attention
        # keys and values, position table) is made here, outside the loop.
        cache, state = self.model.start_decoding(
            encoder_outputs, encoder_mask, length, repeats=rows_per_sentence,
            grow=self.growing_cache, transpose_output_table=not self.jit_compile,
            group_sizes=sizes,
        )
        rows = Rows(
            start_tokens=tf.fill(tf.shape(encoder_tokens)[:1], self.bos_id),
            limits=limits,
            length=length,
            source_mask=tf.not_equal(encoder_tokens, PAD_ID) if strategy.wants_attention else None,
        )

        def step(tokens, index, cache, inputs=None, **options):
            return self.model.decode_token(tokens, index, cache, state, inputs=inputs, **options)

        def reorder(cache, parents):
            return self.model.reorder_cache(cache, parents, state)

        cache_shape = growing_shape if self.growing_cache else None
        return decode(step, strategy, rows, cache, cache_shape=cache_shape, bos_id=self.bos_id,
                      reorder=reorder, row_inputs=self.model.row_inputs(state) if drops else None)

    def _search_loop(self, make_strategy, encoder_tokens, max_new_tokens, groups=1, drops=False):
        return self._search(make_strategy(), encoder_tokens, max_new_tokens, groups=groups,
                            drops=drops)

    def _greedy_strategy(self):
        return GreedySearch(eos_id=self.eos_id)

    def _beam_strategy(self):
        return BeamSearch(self.beam_width, alpha=self.alpha, coverage=self.coverage,
                          eos_id=self.eos_id)
