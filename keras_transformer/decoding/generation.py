"""Text generation with a `LanguageModel`: greedy, temperature, top-k and top-p
sampling, with the key/value cache, in the one decoding loop.

Shape notation: B batch, P prompt length, L sequence length (prompt and new
tokens), N new tokens, V vocabulary.

Prompts come right-padded (0 = padding) and of different lengths. The loop
(`keras_transformer.decoding.loop.decode`) feeds one token per step from position 0
under `GreedySearch` with a `RandomSampler`: while a row is still inside its
prompt, the next token is the prompt's; after it, the sampled one. So every row
runs the same fixed-shape step (`LanguageModel.decode_token`, the translator's step
without cross-attention) and rows of any lengths share a batch.

Every setting is one value a row (as the export's `sample` signature takes them):
`temperature` 0 is greedy; `top_k` 0 and `top_p` 1 turn those filters off; padding,
the start token and the unknown piece are never generated, at any temperature
(`keras_transformer.decoding.samplers` says how a row's draw is made).
"""

import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import EOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.constants import UNK_ID
from keras_transformer.decoding.loop import Rows
from keras_transformer.decoding.loop import decode
from keras_transformer.decoding.loop import longest
from keras_transformer.decoding.loop import pad_to_static_width
from keras_transformer.decoding.samplers import RandomSampler
from keras_transformer.decoding.strategies import GreedySearch
from keras_transformer.ops import checks
from keras_transformer.ops.cache import growing_shape
from keras_transformer.ops.graph import graph_function

# Never generated, beside padding and the start token: a piece no text should show.
NEVER_GENERATED = (UNK_ID,)


class Generator:
    """Generation for one `LanguageModel`, compiled once and reused.

    Args:
        model: a `LanguageModel` (`keras_transformer.build_language_model`).
        max_length: cap on a row's length, prompt and new tokens together
            (default: the model's `config.max_length`, its positional table).
        jit_compile: compile the loop with XLA (the cache then always holds
            `max_length` positions, a static shape, and prompts are padded to one
            of a few widths, `loop.static_widths`).
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
        self, model, max_length=None, jit_compile=False, bos_id=BOS_ID, eos_id=EOS_ID,
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
        loop = graph_function(self._loop, jit_compile=self.jit_compile)

        def generate(prompts, *settings):
            if self.jit_compile:  # a few prompt widths, each compiled once
                prompts = pad_to_static_width(prompts, self.max_length)
            return self._new_tokens(*loop(prompts, *settings))

        self._generate = graph_function(generate, input_signature=signature)

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

    def start_step(self, batch_size, length):
        """The step the loop runs, its first cache and the cache's shape invariant.

        Args:
            batch_size: B.
            length: L, the most positions decoded.

        Returns:
            `(step, cache, cache_shape)`: `LanguageModel.decode_token` over the
            caches `start_decoding` made once (growing without XLA), as
            `keras_transformer.decoding.loop.decode` takes them.
        """
        grow = not self.jit_compile
        cache, state = self.model.start_decoding(batch_size, length, grow=grow,
                                                 transpose_output_table=not self.jit_compile)

        def step(tokens, index, cache):
            return self.model.decode_token(tokens, index, cache, state)

        return step, cache, growing_shape if grow else None

    def _loop(self, prompts, max_new_tokens, temperature, top_k, top_p, seed):
        """Returns the (B, L - 1) tokens after each row's first, prompt lengths and
        row limits (L - 1 at most)."""
        batch_size = tf.shape(prompts)[0]
        # At least one column: an empty prompt starts from `bos_id` there.
        prompts = tf.pad(prompts, [[0, 0], [0, tf.maximum(1 - tf.shape(prompts)[1], 0)]])
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
        # The loop keeps positions 1 .. L - 1: position 0, each row's first token, is
        # the first step's input.
        outputs = max(length - 1, 0) if self.jit_compile else tf.maximum(length - 1, 0)
        following = tf.concat([prompts[:, 1:], tf.zeros([batch_size, length], tf.int32)], axis=1)
        step, cache, cache_shape = self.start_step(batch_size, length)
        rows = Rows(
            start_tokens=prompts[:, 0],
            limits=limits - 1,
            length=outputs,
            prompts=following[:, :outputs],
            prompt_lengths=prompt_lengths - 1,
        )
        strategy = GreedySearch(
            RandomSampler(temperature, top_k, top_p, seed, self.candidates),
            eos_id=self.eos_id, scores=False,
        )
        result = decode(step, strategy, rows, cache, cache_shape=cache_shape,
                        bos_id=self.bos_id, banned=NEVER_GENERATED)
        return result["tokens"], prompt_lengths, limits

    def _new_tokens(self, following, prompt_lengths, limits):
        """Each row's tokens after its prompt, from the loop's positions 1 .. L - 1."""
        new_lengths = limits - prompt_lengths
        positions = prompt_lengths[:, None] - 1 + tf.range(longest(new_lengths))[None, :]
        valid = positions < limits[:, None] - 1
        last = tf.maximum(tf.shape(following)[1] - 1, 0)
        tokens = tf.gather(following, tf.minimum(positions, last), batch_dims=1)
        tokens = tf.where(valid, tokens, PAD_ID)
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(tokens, PAD_ID), tf.int32), axis=-1)
        return {"tokens": tokens[:, : longest(lengths)], "lengths": lengths}
