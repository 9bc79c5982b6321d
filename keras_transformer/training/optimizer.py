"""The optimizer every task trains with: Adam on the Transformer schedule, optionally AdamW.

Imports Keras only inside `make_optimizer`, so the task objects (`keras_transformer.tasks`)
can compile with the training loop's defaults without importing the loop.
"""

# The variables `--weight-decay` leaves alone: biases, LayerNorm scales and offsets.
NO_WEIGHT_DECAY = ("bias", "gamma", "beta")


def make_optimizer(d_model, warmup_steps, lr_scale, clipnorm=None, mixed_precision="none",
                   lr_decay="rsqrt", total_steps=None, weight_decay=0.0, variables=()):
    """Adam(0.9, 0.98, 1e-9) on the warmup-then-rsqrt (or linear) schedule.

    With `weight_decay`, the decay is decoupled from the gradient (AdamW, Loshchilov
    and Hutter, 2019): each step multiplies a weight by `1 - learning_rate ·
    weight_decay` (Keras' own `weight_decay` of every optimizer). Only kernels and
    embeddings decay; biases and the LayerNorm scales and offsets (the variables
    named bias, gamma and beta among `variables`) are exempt, as in BERT's and most
    Transformer recipes: shrinking them towards 0 regularises nothing.

    Args:
        d_model: model width (the schedule's scale).
        warmup_steps: schedule warmup.
        lr_scale: schedule scale factor.
        lr_decay: the schedule's decay after the warmup, "rsqrt" or "linear".
        total_steps: "linear": the step at which the rate reaches 0.
        clipnorm: optional global gradient-norm clip.
        mixed_precision: "mixed_float16" wraps the optimizer in Keras'
            `LossScaleOptimizer` (dynamic loss scaling).
        weight_decay: the decoupled decay rate (0: none, the paper's Adam).
        variables: the model's trainable variables (to find the exempt ones).

    Returns:
        A `keras.optimizers.Optimizer`.
    """
    import keras

    from keras_transformer.training.schedule import TransformerSchedule

    optimizer = keras.optimizers.Adam(
        learning_rate=TransformerSchedule(d_model, warmup_steps=warmup_steps, scale=lr_scale,
                                          decay=lr_decay, total_steps=total_steps),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        global_clipnorm=clipnorm,
        weight_decay=weight_decay or None,
    )
    if weight_decay:
        # By the variables themselves: the TensorFlow optimizer matches `var_names`
        # against its tf.Variables' full names ("block/norm/gamma:0").
        optimizer.exclude_from_weight_decay(
            var_list=[variable for variable in variables if variable.name in NO_WEIGHT_DECAY]
        )
    if mixed_precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
