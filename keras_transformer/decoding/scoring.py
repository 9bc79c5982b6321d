"""Teacher-forced scoring: how likely the model finds a given translation.

Shape notation: B batch, S source length, T target length.
"""

import tensorflow as tf

from keras_transformer.constants import BOS_ID
from keras_transformer.constants import EOS_ID
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding.loop import next_token_log_probs
from keras_transformer.decoding.strategies import coverage_penalty
from keras_transformer.decoding.strategies import length_penalty


def score_sequences(model, encoder_tokens, target_tokens, alpha=0.0, coverage=0.0):
    """Scores targets under the model exactly as the searches score hypotheses.

    Args:
        model: a `Seq2SeqTransformer`.
        encoder_tokens: (B, S) int32 source ids, 0-padded.
        target_tokens: (B, T) int32 target ids without BOS/EOS, 0-padded.
        alpha: length-penalty exponent; 0 gives the plain log-probability.
        coverage: β of the coverage penalty; 0 gives none.

    Returns:
        (B,) float32: log P(target + EOS | source) / ((5 + len) / 6)^alpha, where
        len counts the target tokens and the EOS, + β · `coverage_penalty` of the
        last decoder block's head-averaged cross-attention summed over the len steps.
    """
    encoder_tokens = tf.cast(encoder_tokens, tf.int32)
    target_tokens = tf.cast(target_tokens, tf.int32)
    batch_size = tf.shape(target_tokens)[0]
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(target_tokens, PAD_ID), tf.int32), -1)
    decoder_tokens = tf.concat([tf.fill([batch_size, 1], BOS_ID), target_tokens], axis=1)
    # Labels: the target with EOS written right after its last real token.
    padded = tf.concat([target_tokens, tf.zeros([batch_size, 1], tf.int32)], axis=1)
    eos_position = tf.one_hot(lengths, tf.shape(padded)[1], dtype=tf.int32)
    labels = padded + EOS_ID * eos_position
    logits = model({"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens})
    log_probs = next_token_log_probs(logits)
    token_log_probs = tf.gather(log_probs, labels, batch_dims=2)
    real = tf.not_equal(labels, PAD_ID)
    total = tf.reduce_sum(tf.where(real, token_log_probs, 0.0), axis=-1)
    scores = total / length_penalty(lengths + 1, alpha)
    if coverage:
        cross = model.attention_weights(encoder_tokens, decoder_tokens)["cross"][:, -1]
        attention = tf.reduce_mean(cross, axis=1)  # (B, T + 1, S), as the search's steps
        covered = tf.reduce_sum(tf.where(real[:, :, None], attention, 0.0), axis=1)
        source_mask = tf.not_equal(encoder_tokens, PAD_ID)
        scores += coverage * coverage_penalty(covered, source_mask)
    return scores
