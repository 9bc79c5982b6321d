"""Masked, label-smoothed cross-entropy and masked token accuracy; the other tasks' metrics.

Sequences (translation, language model) use the masked loss and accuracy below,
and a language model also `MaskedPerplexity`; a classifier uses
`ClassificationCrossEntropy`, accuracy and `MacroF1`.

Shape notation: B batch, T target length, V target vocabulary.

Labels are int (B, T) with `PAD_ID` (0) on padding; predictions are float32 logits
(B, T, V). Both the loss and the accuracy average over real (non-padding) tokens
only, so a batch's padding changes nothing.

`--loss-weighting token` changes the gradient, not the value: a batch's loss is
still its mean, but its gradient is that of its sum over a fixed denominator (the
token budget), so that every real token weighs the same whatever its batch
(`with_gradient_scale`).

Under `tf.distribute`, the loss divides each replica's token sum by the token count
of the *global* batch (summed over replicas), so that the gradients Keras sums over
replicas are those of the global per-token mean, whatever the split of tokens
between replicas: training over N devices follows one device with the same
global batch.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.constants import PAD_ID


def smoothed_cross_entropy(labels, logits, label_smoothing=0.1):
    """Per-token cross-entropy against the smoothed target distribution.

    The target puts `1 - label_smoothing` on the label and spreads
    `label_smoothing` evenly over all V classes:
    `q = (1 - ε)·onehot(y) + ε / V`, loss = `-Σ_k q_k log softmax(logits)_k`.

    Computed by TensorFlow's fused softmax cross-entropy kernel, which also
    produces the gradient (softmax - q) in the same pass over (B, T, V); a
    log-softmax followed by a gather spends its time in the gather's gradient
    (a scatter over (B, T, V)).

    Args:
        labels: int (B, T) target ids.
        logits: float (B, T, V) unnormalized scores.
        label_smoothing: ε in [0, 1).

    Returns:
        float32 (B, T) losses, padding included (mask them yourself).
    """
    logits = ops.cast(logits, "float32")
    labels = ops.cast(labels, "int32")
    if not label_smoothing:
        return ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    vocab_size = ops.shape(logits)[-1]
    spread = label_smoothing / ops.cast(vocab_size, "float32")
    targets = tf.one_hot(labels, vocab_size, on_value=1.0 - label_smoothing + spread, off_value=spread)
    return ops.categorical_crossentropy(targets, logits, from_logits=True)


def _checked_smoothing(label_smoothing):
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"`label_smoothing` must be in [0, 1); received {label_smoothing}.")
    return float(label_smoothing)


def _checked_denominator(gradient_denominator):
    if gradient_denominator is None:
        return None
    if not gradient_denominator > 0:
        raise ValueError(
            "`gradient_denominator` must be None (each batch's own count) or a positive "
            f"number; received {gradient_denominator!r}."
        )
    return float(gradient_denominator)


def _global_sum(value):
    """Sums `value` over the replicas of the current strategy (identity for one)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def with_gradient_scale(value, scale):
    """`value` unchanged, with its gradient multiplied by `scale`.

    How `--loss-weighting token` weighs every real token the same whatever its
    batch: batches hold different numbers of real tokens (a batch of short
    sentences fewer than a full batch of long ones, under the same token budget),
    and a per-batch mean gives each batch the same weight, so a token of a batch
    with half the real tokens weighs twice as much. Scaling a mean's gradient by
    `count / denominator` makes it the gradient of the sum over one fixed
    denominator; the value (what the history, early stopping and the best weights
    see) stays the mean.

    Args:
        value: a float tensor.
        scale: a float scalar (no gradient flows through it).
    """
    scaled = value * ops.stop_gradient(scale)
    return scaled + ops.stop_gradient(value - scaled)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Mean label-smoothed cross-entropy over the non-padding tokens of a batch.

    Args:
        label_smoothing: ε, the probability mass spread over the vocabulary
            (the paper uses 0.1).
        pad_id: label id that marks padding; those positions count for nothing.
        gradient_denominator: None, or the fixed count the token sum is divided
            by for the gradient (`with_gradient_scale`).
        name: loss name.

    Call arguments:
        y_true: int (B, T) labels, `pad_id` on padding.
        y_pred: float (B, T, V) logits.

    Returns:
        A float32 scalar: Σ over real tokens of the loss / number of real tokens
        (of the global batch under a distribution strategy).

    Example:
        >>> loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
        >>> loss(np.array([[5, 0]]), np.zeros((1, 2, 8), "float32"))  # doctest: +SKIP
    """

    def __init__(self, label_smoothing=0.1, pad_id=PAD_ID, gradient_denominator=None,
                 name="masked_cross_entropy", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="none", **kwargs)
        self.label_smoothing = _checked_smoothing(label_smoothing)
        self.pad_id = int(pad_id)
        self.gradient_denominator = _checked_denominator(gradient_denominator)

    def call(self, y_true, y_pred):
        losses = smoothed_cross_entropy(y_true, y_pred, self.label_smoothing)
        mask = ops.cast(ops.not_equal(ops.cast(y_true, "int32"), self.pad_id), "float32")
        # A scalar loss is not rescaled by Keras; the replicas' gradients are summed,
        # so dividing each local sum by the global count yields the global mean.
        count = ops.maximum(_global_sum(ops.sum(mask)), 1.0)
        mean = ops.sum(losses * mask) / count
        if self.gradient_denominator is None:
            return mean
        return with_gradient_scale(mean, count / self.gradient_denominator)

    def get_config(self):
        return {
            "name": self.name, "label_smoothing": self.label_smoothing, "pad_id": self.pad_id,
            "gradient_denominator": self.gradient_denominator,
        }


def predicted_ids(logits):
    """The (B, T) int32 arg-max ids of (B, T, V) logits.

    TensorFlow's own `ArgMax`, one pass over the logits, the largest tensor of a
    training step: `keras.ops.argmax` first rewrites every -0.0 (a fix for JAX's
    flush-to-zero), five more passes over (B, T, V) that cost 6% of a training
    step of the small model on a CPU (`python -m bench step`).
    """
    return tf.argmax(logits, axis=-1, output_type=tf.int32)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedTokenAccuracy(keras.metrics.Metric):
    """Share of non-padding tokens whose arg-max prediction equals the label.

    Args:
        pad_id: label id that marks padding.
        name: metric name.

    Call arguments:
        y_true: int (B, T) labels.
        y_pred: float (B, T, V) logits.

    Example:
        >>> metric = MaskedTokenAccuracy()
        >>> metric.update_state(np.array([[4, 0]]), np.eye(8)[[[4, 1]]])  # doctest: +SKIP
        >>> float(metric.result())  # 1.0: the padding position is ignored.  # doctest: +SKIP
    """

    def __init__(self, pad_id=PAD_ID, name="masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = int(pad_id)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        predictions = predicted_ids(y_pred)
        mask = ops.not_equal(y_true, self.pad_id)
        hits = ops.logical_and(ops.equal(predictions, y_true), mask)
        self.correct.assign_add(ops.sum(ops.cast(hits, self.dtype)))
        self.count.assign_add(ops.sum(ops.cast(mask, self.dtype)))

    def result(self):
        return ops.divide_no_nan(self.correct, self.count)

    def reset_state(self):
        self.correct.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedPerplexity(keras.metrics.Metric):
    """exp of the mean cross-entropy (no label smoothing) over the non-padding tokens.

    The perplexity of the data under the model, measured in the same pass as the
    loss (a metric, not a separate evaluation): Σ over real tokens of -log p(label),
    divided by the number of real tokens, exponentiated. Unlike exp(loss), it does not
    include the label smoothing of the training loss.

    Args:
        pad_id: label id that marks padding.
        name: metric name.

    Call arguments:
        y_true: int (B, T) labels.
        y_pred: float (B, T, V) logits.

    Example:
        >>> metric = MaskedPerplexity()
        >>> metric.update_state(np.array([[4, 0]]), np.zeros((1, 2, 8), "float32"))  # doctest: +SKIP
        >>> float(metric.result())  # 8.0: uniform over 8 ids  # doctest: +SKIP
    """

    def __init__(self, pad_id=PAD_ID, name="perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = int(pad_id)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        losses = smoothed_cross_entropy(y_true, y_pred, label_smoothing=0.0)
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        self.total.assign_add(ops.cast(ops.sum(losses * mask), self.dtype))
        self.count.assign_add(ops.cast(ops.sum(mask), self.dtype))

    def result(self):
        return ops.exp(ops.divide_no_nan(self.total, self.count))

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="keras_transformer")
class ClassificationCrossEntropy(keras.losses.Loss):
    """Label-smoothed cross-entropy of class logits, averaged over the batch.

    Args:
        label_smoothing: ε, spread evenly over the C classes (`smoothed_cross_entropy`).
        gradient_denominator: None, or the fixed count the batch's sum is divided by
            for the gradient, so that every example weighs the same whatever its
            batch's size (`with_gradient_scale`).
        name: loss name.

    Call arguments:
        y_true: int (B,) class ids.
        y_pred: float (B, C) logits.
    """

    def __init__(self, label_smoothing=0.1, gradient_denominator=None,
                 name="classification_cross_entropy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.label_smoothing = _checked_smoothing(label_smoothing)
        self.gradient_denominator = _checked_denominator(gradient_denominator)

    def call(self, y_true, y_pred):
        losses = smoothed_cross_entropy(ops.reshape(y_true, (-1,)), y_pred, self.label_smoothing)
        if self.gradient_denominator is None:
            return losses
        # Keras averages these over the batch: B / denominator turns that mean's
        # gradient into the sum's over the denominator.
        rows = ops.cast(ops.shape(losses)[0], "float32")
        return with_gradient_scale(losses, rows / self.gradient_denominator)

    def get_config(self):
        return {
            **super().get_config(), "label_smoothing": self.label_smoothing,
            "gradient_denominator": self.gradient_denominator,
        }


@keras.saving.register_keras_serializable(package="keras_transformer")
class MacroF1(keras.metrics.F1Score):
    """Macro-averaged F1 of class logits against integer labels.

    Keras' `F1Score` (average="macro", the arg-max class counts as predicted) on
    one-hot labels: the mean over classes of each class's F1, so a rare class counts
    as much as a common one.

    Args:
        num_classes: C.
        name: metric name.

    Call arguments:
        y_true: int (B,) class ids.
        y_pred: float (B, C) logits.
    """

    def __init__(self, num_classes, name="macro_f1", **kwargs):
        kwargs.pop("average", None)
        kwargs.pop("threshold", None)
        super().__init__(average="macro", threshold=None, name=name, **kwargs)
        self.num_classes = int(num_classes)

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = ops.one_hot(ops.cast(ops.reshape(y_true, (-1,)), "int32"), self.num_classes)
        super().update_state(labels, ops.cast(y_pred, "float32"), sample_weight)

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes}
