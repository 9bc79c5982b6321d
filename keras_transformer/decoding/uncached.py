"""The TensorFlow tutorial's translator loop, kept as a reference and a baseline.

At every step the whole model (encoder and decoder) reruns on the full prefix, as in
the TensorFlow "Neural machine translation with a Transformer and Keras" tutorial.
The tests check the cached search against it token for token, and `bench/` measures
how much the cache saves.
"""

import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import EOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding.search import longest
from keras_transformer.decoding.search import next_token_log_probs


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
