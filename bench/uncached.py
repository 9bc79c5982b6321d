"""The uncached loops: the baselines of `bench decoding` / `bench generation` / `bench
export`, and the references the tests compare the cached decoding with.

At every step they rerun the whole model on the full prefix, as the TensorFlow
"Neural machine translation with a Transformer and Keras" tutorial's `Translator`
does; they are slow on purpose and never part of the package.

- `make_uncached_greedy`: the tutorial's translator loop (its own `tf.while_loop`,
  encoder and decoder rerun per step).
- `UncachedGenerator`: a `Generator` whose step reruns the language model on the
  prefix (the one decoding loop with another step), with every sampling setting.
"""

import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import EOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding import Generator
from keras_transformer.decoding.loop import longest
from keras_transformer.decoding.loop import next_token_log_probs


def make_uncached_greedy(model, max_length, bos_id=BOS_ID, eos_id=EOS_ID):
    """Returns a compiled uncached greedy decoder `f(encoder_tokens) -> (B, L) ids`.

    Rows stop at EOS (later positions are 0) or after `max_length` tokens; EOS is
    replaced by 0 and the output cut to its longest row, as in `SequenceSearch`.
    """

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def decode(encoder_tokens):
        batch_size = tf.shape(encoder_tokens)[0]
        prefix = tf.fill([batch_size, 1], bos_id)
        finished = tf.zeros([batch_size], tf.bool)

        def condition(prefix, finished):
            return tf.logical_not(tf.reduce_all(finished))

        def body(prefix, finished):
            logits = model(
                {"encoder_tokens": encoder_tokens, "decoder_tokens": prefix}, training=False
            )
            log_probs = next_token_log_probs(logits[:, -1], bos_id=bos_id)
            chosen = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
            chosen = tf.where(finished, PAD_ID, chosen)
            finished = finished | tf.equal(chosen, eos_id)
            return tf.concat([prefix, chosen[:, None]], axis=1), finished

        prefix, _ = tf.while_loop(
            condition,
            body,
            (prefix, finished),
            shape_invariants=(tf.TensorShape([None, None]), tf.TensorShape([None])),
            maximum_iterations=max_length,
        )
        tokens = prefix[:, 1:]
        ended = tf.cumsum(tf.cast(tf.equal(tokens, eos_id), tf.int32), axis=-1) > 0
        tokens = tf.where(ended, tf.zeros_like(tokens), tokens)
        lengths = tf.reduce_sum(tf.cast(tokens != PAD_ID, tf.int32), axis=-1)
        return tokens[:, : longest(lengths)]

    return decode


class UncachedGenerator(Generator):
    """`Generator` whose step reruns the whole `LanguageModel` on the prefix.

    Its "cache" is the (B, T) prefix itself, one position longer at every step, a
    shape XLA cannot compile once: `jit_compile=True` is refused.
    """

    def __init__(self, model, jit_compile=False, **options):
        if jit_compile:
            raise ValueError(
                "An uncached generator needs `jit_compile=False`: its prefix grows every "
                "step, a shape XLA cannot compile once."
            )
        super().__init__(model, **options)

    def start_step(self, batch_size, length):
        def step(tokens, index, prefix):
            prefix = tf.concat([prefix, tokens[:, None]], axis=1)
            return self.model(prefix, training=False)[:, -1], prefix

        prefix = tf.zeros([batch_size, 0], tf.int32)
        return step, prefix, lambda _: tf.TensorShape([None, None])
