"""One loaded SavedModel version: its signatures, their checks and calls.

The signature specs (input and output names, dtypes, shapes, method names)
come from the SignatureDefs in `saved_model.pb`, as TF Serving reads them; the
calls go through the functions `tf.saved_model.load` restores. Nothing here
knows how the model was built.

Shapes: B is the batch dimension (the first axis of every batchable input).
"""

import os
import time

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import get_model_metadata_pb2

# Registers tensorflow-text's ops (SentencePiece, ...) before any graph that
# uses them is loaded; the import itself is the point.
import tensorflow_text  # noqa: F401

from keras_transformer.serving import budgets
from keras_transformer.serving import errors

DEFAULT_SIGNATURE = "serving_default"
PREDICT_METHOD = "tensorflow/serving/predict"
SERVE_TAG = "serve"


# TensorFlow's DataTypeString names, which TF Serving's messages use.
_TF_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half"}


def _dtype_name(dtype):
    """"float" for tf.float32 or np.float32, "string" for strings, and so on."""
    if isinstance(dtype, np.dtype) and dtype.kind in ("O", "S", "U"):
        return "string"
    name = tf.as_dtype(dtype).name
    return _TF_TYPE_NAMES.get(name, name)


def _shape_text(shape):
    if shape.rank is None:
        return "[?]"
    return "[" + ",".join("-1" if d is None else str(d) for d in shape.as_list()) + "]"


class TensorSpecInfo:
    """dtype and shape of one signature input or output."""

    def __init__(self, name, tensor_info):
        self.name = name
        self.dtype = tf.dtypes.as_dtype(tensor_info.dtype)
        self.shape = tf.TensorShape(tensor_info.tensor_shape)


class Signature:
    """A callable signature with the checks TF Serving applies to requests.

    Args:
        name: the signature key.
        signature_def: its `SignatureDef` proto.
        function: the restored concrete function (None for signatures that
            cannot be called, such as `__saved_model_init_op`).

    Attributes:
        latest_pace: a `budgets.Pace`, what the latest call with rows took
            (warmup's included), None before any; sizes the first slice of a
            sliced call (`budgets.sliced_call`).
    """

    def __init__(self, name, signature_def, function):
        self.name = name
        self.method_name = signature_def.method_name
        self.inputs = {k: TensorSpecInfo(k, v) for k, v in sorted(signature_def.inputs.items())}
        self.outputs = {k: TensorSpecInfo(k, v) for k, v in sorted(signature_def.outputs.items())}
        self.function = function
        self.latest_pace = None

    @property
    def batchable(self):
        """Whether requests can be merged: every input and output is (B, ...)."""
        specs = list(self.inputs.values()) + list(self.outputs.values())
        return bool(self.inputs) and all(
            s.shape.rank is not None and s.shape.rank >= 1 and s.shape[0] is None
            for s in specs)

    def row_count(self, inputs):
        """B when every input has the batch dimension the signature declares, else None."""
        if not self.batchable:
            return None
        sizes = {np.shape(array)[0] for array in inputs.values() if np.ndim(array)}
        return sizes.pop() if len(sizes) == 1 else None

    def check_inputs(self, inputs):
        """Validates and normalizes request tensors against the signature.

        Args:
            inputs: dict {input name: numpy array}.

        Returns:
            dict {input name: numpy array of the signature's dtype}.

        Raises:
            ServingError: INVALID_ARGUMENT on missing or extra names, a wrong
                dtype, or a shape the signature does not accept.
        """
        expected, given = set(self.inputs), set(inputs)
        if expected != given:
            raise errors.invalid_argument(
                f"Request inputs do not match required inputs for signature "
                f"'{self.name}'. Send extra: {{{','.join(sorted(given - expected))}}}. "
                f"Missing but required: {{{','.join(sorted(expected - given))}}}.")
        checked = {}
        for name, spec in self.inputs.items():
            array = np.asarray(inputs[name])
            checked[name] = self._check_dtype(name, spec, array)
            if not spec.shape.is_compatible_with(array.shape):
                raise errors.invalid_argument(
                    f"Input '{name}' has shape {_shape_text(tf.TensorShape(array.shape))} "
                    f"but signature '{self.name}' expects {_shape_text(spec.shape)}")
        return checked

    @staticmethod
    def _check_dtype(name, spec, array):
        if spec.dtype == tf.string:
            if array.dtype.kind in ("O", "S") or array.size == 0:
                if array.dtype.kind == "O" and not all(isinstance(v, bytes) for v in array.flat):
                    raise errors.invalid_argument(f"Input '{name}' expects bytes values")
                return array.astype(object)
        elif array.dtype == spec.dtype.as_numpy_dtype:
            return array
        elif array.size == 0 and array.dtype.kind in ("f", "O"):
            return array.astype(spec.dtype.as_numpy_dtype)  # [] parses as float64.
        raise errors.invalid_argument(
            f"Expects arg '{name}' to be {_dtype_name(spec.dtype)} but "
            f"{_dtype_name(array.dtype)} is provided")

    def run(self, inputs):
        """Runs the signature once.

        Args:
            inputs: checked inputs (see `check_inputs`).

        Returns:
            dict {output name: numpy array}.
        """
        if self.function is None:
            raise errors.invalid_argument(f"Signature '{self.name}' cannot be called")
        started = time.monotonic()
        feed = {name: tf.constant(value, dtype=self.inputs[name].dtype)
                for name, value in inputs.items()}
        try:
            outputs = self.function(**feed)
        except Exception as error:  # TF raises many types; all map to a status.
            raise errors.from_exception(error) from error
        outputs = {name: tensor.numpy() for name, tensor in outputs.items()}
        rows = self.row_count(inputs)
        if rows:
            self.latest_pace = budgets.Pace(
                time.monotonic() - started, rows,
                sum(budgets.array_bytes(array) for array in inputs.values()))
        return outputs


def read_signature_defs(export_dir):
    """Reads the `serve` MetaGraph's SignatureDefs without running anything.

    Returns:
        A `SignatureDefMap` proto (the message GetModelMetadata returns).

    Raises:
        ServingError: NOT_FOUND without a SavedModel file, DATA_LOSS when it
            cannot be parsed, NOT_FOUND when no MetaGraph has the serve tag.
    """
    saved_model = saved_model_pb2.SavedModel()
    binary = os.path.join(export_dir, "saved_model.pb")
    text = os.path.join(export_dir, "saved_model.pbtxt")
    try:
        if os.path.exists(binary):
            with open(binary, "rb") as file:
                saved_model.ParseFromString(file.read())
        elif os.path.exists(text):
            with open(text, encoding="utf-8") as file:
                text_format.Parse(file.read(), saved_model)
        else:
            raise errors.not_found(
                "Could not find SavedModel .pb or .pbtxt at supplied export directory "
                f"path: {export_dir}")
    except errors.ServingError:
        raise
    except Exception as error:  # DecodeError, ParseError, OSError.
        raise errors.ServingError(
            "DATA_LOSS", f"Could not parse SavedModel at {export_dir}: {error}") from error
    for meta_graph in saved_model.meta_graphs:
        if SERVE_TAG in meta_graph.meta_info_def.tags:
            signature_map = get_model_metadata_pb2.SignatureDefMap()
            for key, value in meta_graph.signature_def.items():
                signature_map.signature_def[key].CopyFrom(value)
            return signature_map
    raise errors.not_found(
        f"Could not find meta graph def matching supplied tags: {{ {SERVE_TAG} }} in {export_dir}")


class Servable:
    """A SavedModel version loaded in memory.

    Args:
        export_dir: the version folder.

    Attributes:
        signature_def_map: the `SignatureDefMap` proto, for metadata.
        signatures: dict {name: Signature} of the callable signatures.
    """

    def __init__(self, export_dir):
        self.export_dir = export_dir
        self.signature_def_map = read_signature_defs(export_dir)
        try:
            self._loaded = tf.saved_model.load(export_dir, tags=[SERVE_TAG])
        except Exception as error:
            raise errors.from_exception(error) from error
        functions = self._loaded.signatures
        self.signatures = {
            name: Signature(name, signature_def, functions[name])
            for name, signature_def in self.signature_def_map.signature_def.items()
            if name in functions}

    def signature(self, name):
        """Looks up a signature by name ("" means serving_default).

        Raises:
            ServingError: INVALID_ARGUMENT when the name is unknown, with
                TF Serving's message.
        """
        name = name or DEFAULT_SIGNATURE
        signature = self.signatures.get(name)
        if signature is None:
            raise errors.invalid_argument(
                f'Serving signature name: "{name}" not found in signature def')
        return signature

    def unload(self):
        """Drops the references that keep the model's graph and variables alive."""
        self.signatures = {}
        self._loaded = None
