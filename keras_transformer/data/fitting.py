"""What `fit` reads, whatever the task: batches padded to a few fixed shapes for XLA,
and the `tf.data` options of the training and validation pipelines.
"""

# Under XLA, batch widths are padded up to multiples of this: one compiled shape each.
STATIC_WIDTH_STEP = 8


def training_width_step(static_shapes):
    """The `width_step` of a training pipeline: what its batches' widths will be padded to."""
    return STATIC_WIDTH_STEP if static_shapes else 1


def pad_to_static_shapes(
    dataset, max_length, token_budget=None, rows=None, pad_rows=True, step=STATIC_WIDTH_STEP
):
    """Pads batches to a few fixed shapes, so XLA compiles only those (every task).

    The (B, L) id tensors of a batch (a translator's encoder, decoder and label
    tokens; a language model's tokens and labels; a classifier's tokens) all get the
    width L' = the widest of them rounded up to a multiple of `step` (at most
    `max_length`), and with `pad_rows` B' = `rows`, or `token_budget // L'` (the
    size of a full batch of its bucket in the token-budgeted pipeline). Extra rows
    and columns are padding, which the losses and metrics ignore. (B,) tensors (a
    classifier's labels, which have no padding value) stay as they are, and so do
    the rows when `pad_rows` is False.
    """
    import tensorflow as tf

    from keras_transformer.constants import PAD_ID
    from keras_transformer.data.pipeline import round_up

    @tf.autograph.experimental.do_not_convert  # plain tensor ops, nothing to convert
    def pad(*element):
        tokens = [t for t in tf.nest.flatten(element) if t.shape.rank == 2]
        count = tf.shape(tokens[0])[0]
        longest = tf.reduce_max(tf.stack([tf.shape(t)[1] for t in tokens]))
        length = tf.minimum(round_up(longest, step), max_length)
        batch = tf.maximum(token_budget // length if rows is None else rows, count) if pad_rows else count

        def to_shape(tensor):
            if tensor.shape.rank != 2:
                return tensor
            return tf.pad(tensor, [[0, batch - count], [0, length - tf.shape(tensor)[1]]],
                          constant_values=PAD_ID)

        return tf.nest.map_structure(to_shape, element)

    return dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE)


def for_fit(train, validation):
    """The training and validation pipelines with the `tf.data` options `fit` needs.

    - Every worker builds the same validation pipeline and takes its share of every
      batch (`AutoShardPolicy.DATA`); the training stream is each worker's own
      share already (`streaming.pass_strings`), given whole to its worker
      (`training.trainer.prepare_for_fit`).
    - No autotuning. Keras (3.15) makes a new iterator of a dataset of unknown
      length every epoch and drops the one before, partly read (the validation
      batches; the training stream, read `steps_per_epoch` at a time, keeps one).
      Deleting an autotuned iterator waits for its tuning thread, which sleeps
      between rounds, twice as long each round up to 60 s: a translation run on a
      2-core CPU sat idle for about 50 s at the start of every other epoch or of
      its validation (106-step epochs alternating 142 s and 90 s; without
      autotuning, 88-89 s each).

    Args:
        train: the training `tf.data.Dataset`.
        validation: the validation `tf.data.Dataset`.

    Returns:
        `(train, validation)` with those options.
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.autotune.enabled = False
    return train.with_options(options), validation.with_options(options)
