"""Attention layer speed: `MultiHeadSelfAttention` versus `keras.layers.MultiHeadAttention`.

Self-attention with a padding mask, forward and backward (gradients of a scalar
of the outputs with respect to the input and every weight), in one
`tf.function` per layer, at several sequence lengths L with the batch B sized so
that B·L tokens stay fixed. Both layers have the preset's heads and width
(H heads of D = M / H), and the same weights: Keras' are copied from ours, and
the outputs are checked to agree on the real (non-padding) positions before
timing. The two functions are called in turn (`time_interleaved`); median
times. Keras' layer gets the mask as `value_mask` (keys only), which has the
same meaning as ours and is its cheapest form. Ratio = Keras' time / ours
(above 1: ours is faster).
"""

import numpy as np

from bench.common import jit_modes
from bench.common import time_interleaved

LENGTHS = (16, 64, 256, 1024)


def _layers(num_heads, model_dim, precision):
    import keras

    from keras_transformer.layers.attention import MultiHeadSelfAttention

    dtype = None if precision == "none" else precision
    ours = MultiHeadSelfAttention(num_heads=num_heads, dtype=dtype)
    ours.build((None, None, model_dim))
    theirs = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=model_dim // num_heads,
                                             dtype=dtype)
    theirs.build((None, None, model_dim), (None, None, model_dim))
    pairs = [
        (theirs._query_dense, ours.query_dense),
        (theirs._key_dense, ours.key_dense),
        (theirs._value_dense, ours.value_dense),
        (theirs._output_dense, ours.output_dense),
    ]
    for keras_dense, our_dense in pairs:
        keras_dense.kernel.assign(our_dense.kernel)
        keras_dense.bias.assign(keras.random.normal(our_dense.bias.shape, stddev=0.1, seed=1))
        our_dense.bias.assign(keras_dense.bias)
    return ours, theirs


def _step(layer, call, jit):
    import tensorflow as tf

    @tf.function(jit_compile=jit)
    def step(x, mask):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = call(layer, x, mask)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
        gradients = tape.gradient(loss, [x, *layer.trainable_variables])
        # Depends on every gradient, so fetching it waits for the whole step.
        return tf.add_n([tf.reduce_sum(tf.cast(g, tf.float32)) for g in gradients])

    return step


def _ours(layer, x, mask):
    return layer(x, query_padding_mask=mask)


def _keras(layer, x, mask):
    return layer(query=x, value=x, value_mask=mask)


def run(results, quick=False, lengths=LENGTHS):
    import tensorflow as tf

    from keras_transformer.models import preset as make_preset

    options = results.options
    preset = options.get("preset", "small")
    precision = options.get("mixed_precision", "none")
    modes = jit_modes(options)
    config = make_preset(preset)
    tokens = 2048 if quick else 8192
    repeats = 3 if quick else 10
    ours, theirs = _layers(config.num_heads, config.d_model, precision)
    rng = np.random.default_rng(0)
    for length in lengths:
        batch = max(1, tokens // length)
        x = tf.constant(rng.normal(size=(batch, length, config.d_model)).astype("float32"))
        real = rng.integers(length // 2, length + 1, size=batch)
        mask = tf.constant(np.arange(length)[None, :] < real[:, None])
        got = np.asarray(tf.cast(_ours(ours, x, mask), tf.float32))
        want = np.asarray(tf.cast(_keras(theirs, x, mask), tf.float32))
        keep = np.asarray(mask)
        tolerance = 1e-3 if precision == "none" else 5e-2
        if not np.allclose(got[keep], want[keep], atol=tolerance, rtol=tolerance):
            raise AssertionError(f"the two layers disagree at length {length}: max difference "
                                 f"{np.abs(got[keep] - want[keep]).max():.3g}")
        for jit in modes:
            ours_step = _step(ours, _ours, jit)
            keras_step = _step(theirs, _keras, jit)
            ours_time, keras_time = time_interleaved(
                [lambda: ours_step(x, mask).numpy(), lambda: keras_step(x, mask).numpy()],
                warmup=2, repeats=repeats)
            case = (f"{preset} (H={config.num_heads}, M={config.d_model}), L={length}, B={batch}"
                    + (", XLA" if jit else "") + ("" if precision == "none" else f", {precision}"))
            results.add("attention", case, "fwd+bwd (keras.layers.MultiHeadAttention)",
                        keras_time * 1e3, "ms")
            results.add("attention", case, "fwd+bwd (MultiHeadSelfAttention, ours)",
                        ours_time * 1e3, "ms", ratio=keras_time / ours_time,
                        baseline="keras MultiHeadAttention (time ratio)")
