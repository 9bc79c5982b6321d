"""One call that checks what every layer owes Keras (the idea of KerasHub's `run_layer_test`).

`run_layer_test(layer_class, init_kwargs, input_data, expected_output_shape)`
checks, in order:

1. Config: `from_config(get_config())` gives the same config, also through
   `keras.saving.serialize_keras_object` and JSON.
2. Shapes: the eager outputs, the symbolic outputs (KerasTensors) and
   `compute_output_shape` all equal `expected_output_shape`; outputs are finite.
3. Saving: a functional model around the layer gives the same outputs after a
   `.keras` save and load, and so does a clone from its config given its weights.
4. A training step: every trainable weight gets a finite gradient (every weight
   but a bias a non-zero one, so no sub-layer is left out of the computation), and
   one SGD step lowers a loss.
5. Mixed precision (`mixed_bfloat16`): weights stay float32, float outputs (eager
   and symbolic) are bfloat16 and finite.
"""

import inspect
import json

import keras
import numpy as np
import tensorflow as tf
from keras import tree


def _shapes(structure):
    return tree.map_structure(lambda x: tuple(x.shape), structure)


def _floats(structure):
    return [x for x in tree.flatten(structure) if "float" in str(x.dtype)]


def _numpy(structure):
    return tree.map_structure(lambda x: keras.ops.convert_to_numpy(x), structure)


def _assert_all_close(got, expected):
    # Compared flat: a reloaded functional model returns lists where the layer
    # returned tuples.
    got, expected = tree.flatten(got), tree.flatten(expected)
    assert len(got) == len(expected)
    for got_tensor, expected_tensor in zip(got, expected):
        np.testing.assert_allclose(got_tensor, expected_tensor, atol=1e-6)


def _assert_finite(structure, what):
    for tensor in _floats(structure):
        values = np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32")))
        assert np.all(np.isfinite(values)), f"{what}: non-finite values"


def _check_config(layer_class, init_kwargs):
    layer = layer_class(**init_kwargs)
    config = json.dumps(layer.get_config(), sort_keys=True)
    clone = layer_class.from_config(layer.get_config())
    assert json.dumps(clone.get_config(), sort_keys=True) == config
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    revived = keras.saving.deserialize_keras_object(serialized)
    assert type(revived) is layer_class
    assert json.dumps(revived.get_config(), sort_keys=True) == config


def _check_shapes(layer_class, init_kwargs, input_data, call_kwargs, expected_output_shape):
    layer = layer_class(**init_kwargs)
    outputs = layer(**input_data, **call_kwargs)
    assert _shapes(outputs) == expected_output_shape, "eager output shape"
    _assert_finite(outputs, "eager outputs")

    symbolic = layer_class(**init_kwargs)
    symbolic_inputs = {
        name: keras.KerasTensor(value.shape, str(value.dtype)) for name, value in input_data.items()
    }
    symbolic_outputs = symbolic(**symbolic_inputs, **call_kwargs)
    assert _shapes(symbolic_outputs) == expected_output_shape, "symbolic output shape"

    # compute_output_shape describes the main output (the first one returned); it
    # takes `<call argument>_shape` arguments, as `build` does.
    accepted = inspect.signature(layer.compute_output_shape).parameters
    shapes = {f"{name}_shape": value.shape for name, value in input_data.items()}
    computed = layer.compute_output_shape(**{k: v for k, v in shapes.items() if k in accepted})
    assert tuple(computed) == tuple(tree.flatten(outputs)[0].shape), "compute_output_shape"


def _check_saving(layer_class, init_kwargs, input_data, call_kwargs, tmp_path):
    inputs = {
        name: keras.Input(batch_shape=value.shape, dtype=str(value.dtype), name=name)
        for name, value in input_data.items()
    }
    layer = layer_class(**init_kwargs)
    model = keras.Model(inputs, layer(**inputs, **call_kwargs))
    expected = _numpy(model(input_data))

    path = tmp_path / f"{layer_class.__name__}.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    _assert_all_close(_numpy(restored(input_data)), expected)

    clone = layer_class.from_config(layer.get_config())
    clone_model = keras.Model(inputs, clone(**inputs, **call_kwargs))
    clone_model.set_weights(model.get_weights())
    _assert_all_close(_numpy(clone_model(input_data)), expected)


def _check_training_step(layer_class, init_kwargs, input_data, call_kwargs):
    layer = layer_class(**init_kwargs)
    outputs = layer(**input_data, **call_kwargs)
    if not layer.trainable_weights:
        return
    rng = np.random.default_rng(0)
    # A fixed random linear read-out: unlike a sum of squares, its gradient does not
    # vanish through a final LayerNormalization.
    targets = [rng.normal(size=x.shape).astype("float32") for x in _floats(outputs)]

    with tf.GradientTape() as tape:
        results = _floats(layer(**input_data, **call_kwargs, training=True))
        loss = sum(tf.reduce_mean(tf.cast(x, "float32") * t) for x, t in zip(results, targets))
    gradients = tape.gradient(loss, layer.trainable_weights)
    for weight, gradient in zip(layer.trainable_weights, gradients):
        assert gradient is not None, f"no gradient reaches {weight.path}"
        gradient = np.asarray(gradient)
        assert np.all(np.isfinite(gradient)), f"non-finite gradient for {weight.path}"
        # A key bias adds the same score to every key of a query, which softmax
        # ignores; kernels, tables and norms must all be used.
        if not weight.path.endswith("bias"):
            assert np.any(gradient != 0), f"zero gradient for {weight.path}"
    old = [np.array(w) for w in layer.trainable_weights]
    keras.optimizers.SGD(learning_rate=0.01).apply(gradients, layer.trainable_weights)
    for weight, old_value in zip(layer.trainable_weights, old):
        if not weight.path.endswith("bias"):
            assert not np.array_equal(np.asarray(weight), old_value), f"{weight.path} unchanged"


def _check_mixed_precision(layer_class, init_kwargs, input_data, call_kwargs):
    policy = keras.DTypePolicy("mixed_bfloat16")
    layer = layer_class(**{**init_kwargs, "dtype": policy})
    outputs = layer(**input_data, **call_kwargs)
    for weight in layer.weights:
        assert weight.dtype == policy.variable_dtype, f"{weight.path} is {weight.dtype}"
    for tensor in _floats(outputs):
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        assert dtype == policy.compute_dtype, f"output is {dtype} under {policy.name}"
    _assert_finite(outputs, "mixed-precision outputs")
    specs = layer.compute_output_spec(
        **{name: keras.KerasTensor(v.shape, str(v.dtype)) for name, v in input_data.items()},
        **call_kwargs,
    )
    for spec in _floats(specs):
        assert spec.dtype == policy.compute_dtype, f"symbolic output is {spec.dtype}"


def run_layer_test(
    layer_class,
    init_kwargs,
    input_data,
    expected_output_shape,
    tmp_path,
    call_kwargs=None,
):
    """Checks config, shapes, saving, a training step and mixed precision of a layer.

    Args:
        layer_class: the layer class.
        init_kwargs: its constructor arguments.
        input_data: {call argument name: numpy array}, the first being the main
            input; passed by name to `call`, and to `build` as `<name>_shape`.
        expected_output_shape: the shape of the output (a tuple), or a structure of
            shapes when `call` returns several tensors.
        tmp_path: a folder for the `.keras` file.
        call_kwargs: non-tensor `call` arguments (e.g. `return_attention_scores`).
    """
    call_kwargs = dict(call_kwargs or {})
    _check_config(layer_class, init_kwargs)
    _check_shapes(layer_class, init_kwargs, input_data, call_kwargs, expected_output_shape)
    _check_saving(layer_class, init_kwargs, input_data, call_kwargs, tmp_path)
    _check_training_step(layer_class, init_kwargs, input_data, call_kwargs)
    _check_mixed_precision(layer_class, init_kwargs, input_data, call_kwargs)
