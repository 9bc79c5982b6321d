"""`step`: our training step vs Keras' stock norm and arg-max, and other activations vs the preset's.

Two parts of a training step are ours where Keras has its own:

- `keras_transformer.layers.LayerNormalization` (every block's norms) trains
  through a closed-form gradient; `keras.layers.LayerNormalization` lets
  TensorFlow differentiate its forward formula.
- the masked accuracy takes its predictions with TensorFlow's `ArgMax`
  (`training.losses.predicted_ids`); `keras.ops.argmax` first rewrites every
  -0.0 logit, five more passes over the (B, T, V) logits.

Designs, one model config, the same batches (`bench.training.Design`, so the
method of the `training` benchmark: every batch shape warmed up, then rounds of
every batch of every design in turn, each batch at its fastest round):

- **stock**: both of Keras' (patched in with `unittest.mock` while it is built
  and traced);
- **ours, arg-max only**: our arg-max, Keras' norm;
- **ours**: the package as it is;
- **ours, NAME**: the package with each other feed-forward activation that
  `train --activation` offers, against **ours** (the preset's: silu for `small`,
  relu for the others): what a step pays or saves with it (README, "Sessions
  34-35").

The model runs in the precision `--mixed-precision` names (float32 by default).
A second pair of rows times one norm alone, forward and backward, in float32, on
the (B, T, M) activations of a 4,096-token batch: chains of norms in one
`tf.function`, both layers alternated.
"""

import dataclasses
import time
from unittest import mock

from bench import training
from keras_transformer.ops.choices import ACTIVATIONS

NORM_CHAIN = 12


def _stock_norm():
    import keras

    from keras_transformer.layers import normalization

    return mock.patch.object(normalization.LayerNormalization, "call",
                             keras.layers.LayerNormalization.call)


def _stock_arg_max():
    from keras import ops

    from keras_transformer.training import losses

    return mock.patch.object(losses, "predicted_ids",
                             lambda logits: ops.cast(ops.argmax(logits, axis=-1), "int32"))


def _norm_seconds(layer, inputs, upstream, rounds):
    import tensorflow as tf

    @tf.function
    def chain(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x
            for _ in range(NORM_CHAIN):
                y = layer(y)
            loss = tf.reduce_sum(y * upstream)
        return tape.gradient(loss, x)

    chain(inputs)
    times = []
    for _ in range(rounds):
        begin = time.perf_counter()
        chain(inputs).numpy()
        times.append(time.perf_counter() - begin)
    return min(times) / NORM_CHAIN


def _time_norms(results, config, quick):
    import keras
    import tensorflow as tf

    from keras_transformer.layers.normalization import LayerNormalization

    rows, width = (32, 16) if quick else (128, 32)  # (B, T): 4,096 positions
    shape = (rows, width, config.d_model)
    inputs, upstream = tf.random.normal(shape, seed=1), tf.random.normal(shape, seed=2)
    layers = {"ours": LayerNormalization(), "stock": keras.layers.LayerNormalization()}
    seconds = {name: [] for name in layers}
    for layer in layers.values():
        layer.build(shape)
    for _ in range(2 if quick else 5):  # alternated, so load changes touch both alike
        for name, layer in layers.items():
            seconds[name].append(_norm_seconds(layer, inputs, upstream, 3 if quick else 5))
    best = {name: min(values) for name, values in seconds.items()}
    case = f"one norm, forward + backward, (B, T, M) = {shape}"
    results.add("step", f"{case}, stock", "time", best["stock"] * 1e3, "ms")
    results.add("step", f"{case}, ours", "time", best["ours"] * 1e3, "ms",
                ratio=best["stock"] / best["ours"], baseline="keras.layers.LayerNormalization")


def run(results, quick=False):
    options = results.options
    preset = "tiny" if quick else options.get("preset", "small")
    steps = options.get("steps") or (2 if quick else 8)
    config = training.model_config(preset)
    budget = options.get("token_budget", 4096)
    precision = options.get("mixed_precision", "none")
    designs = {}
    with _stock_norm(), _stock_arg_max():
        designs["stock"] = training.Design("ours", config, False, precision, budget, steps=steps)
    batches = designs["stock"].batches
    with _stock_norm():
        designs["ours, arg-max only"] = training.Design("ours", config, False, precision, budget,
                                                         batches=batches)
    designs["ours"] = training.Design("ours", config, False, precision, budget, batches=batches)
    baselines = {"ours, arg-max only": "stock", "ours": "stock"}
    for activation in ACTIVATIONS:
        if activation != config.activation:
            name = f"ours, {activation}"
            designs[name] = training.Design(
                "ours", dataclasses.replace(config, activation=activation), False, precision,
                budget, batches=batches,
            )
            baselines[name] = "ours"
    for _ in range(2 if quick else 3):
        for index in range(len(batches)):
            for design in designs.values():
                design.step(index)
    seconds = {name: design.summary()["seconds"] / len(batches)
               for name, design in designs.items()}
    case = f"{preset}, {precision}, the same {len(batches)} batches"
    for name, step in seconds.items():
        baseline = baselines.get(name)
        results.add("step", f"{case}, {name}", "step time", step * 1e3, "ms",
                    ratio=None if baseline is None else seconds[baseline] / step,
                    baseline=baseline)
    _time_norms(results, config, quick)
