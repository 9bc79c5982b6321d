"""TF Serving's REST JSON formats <-> numpy arrays and protos.

Follows tensorflow_serving/util/json_tensor.cc: the row format ("instances")
and the columnar format ("inputs"), `{"b64": ...}` for binary strings, output
names ending in `_bytes` written as base64, floats written with the shortest
text that reads back to the same float32, NaN/Infinity as bare words, and the
same error messages where a client may rely on them. Classify requests
(`{"examples": [...], "context": {...}}`) become an `Input` proto of
`tf.Example`s, and their results `{"results": [[[label, score], ...], ...]}`
(TF Serving writes "results", although its REST guide shows "result").
"""

import base64
import binascii
import json
import time

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import input_pb2

from keras_transformer.serving import errors

ROW, COLUMNAR = "row", "columnar"
_BYTES_SUFFIX = "_bytes"
_FLOAT32_MAX_INT = (1 << 24) - 1
_FLOAT64_MAX_INT = (1 << 53) - 1
_MAX_INT64 = (1 << 63) - 1
_MAX_RANK = 32  # numpy stops at 64 dimensions; no signature needs more than a few.


def _json_text(value, limit=200):
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = f"<{_json_type(value)}>"
    return text if len(text) <= limit else text[:limit] + "..."


def _json_type(value):
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


class _NumberTooBig(ValueError):
    pass


# Digits of the largest double (1.8e308): a longer integer is no number any tensor
# holds, and Python's int() refuses more than 4300 digits with a bare ValueError.
_MAX_INTEGER_DIGITS = 309


def _parse_int(text):
    digits = len(text) - text.startswith("-")
    if digits > _MAX_INTEGER_DIGITS:
        shown = text[:20] + "..."
        raise _NumberTooBig(f"Number too big to be stored in double: {shown} ({digits} digits)")
    return int(text)


def parse_body(body):
    """Parses a request body as a JSON object.

    Args:
        body: the raw bytes.

    Returns:
        The decoded dict.

    Raises:
        ServingError: INVALID_ARGUMENT for an empty body, bytes that are not
            UTF-8, malformed JSON (an integer beyond any double included), or a
            top level that is not an object.
    """
    if not body:
        raise errors.invalid_argument("JSON Parse error: The document is empty")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise errors.invalid_argument(
            f"JSON Parse error: Invalid encoding in string. at offset: {error.start}") from None
    try:
        document = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as error:
        raise errors.invalid_argument(
            f"JSON Parse error: {error.msg} at offset: {error.pos}") from None
    except _NumberTooBig as error:
        raise errors.invalid_argument(f"JSON Parse error: {error}") from None
    except RecursionError:
        raise errors.invalid_argument("JSON Parse error: nested too deeply") from None
    if not isinstance(document, dict):
        raise errors.invalid_argument(f"JSON Value: {_json_text(document)} Is not object")
    return document


def signature_name(document):
    """The optional "signature_name" key ("" when absent)."""
    value = document.get("signature_name", "")
    if not isinstance(value, str):
        raise errors.invalid_argument(
            f"JSON Value: {_json_text(document)} not formatted correctly. "
            "'signature_name' key must be a string value.")
    return value


def _is_b64(value):
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


# ---------------------------------------------------------------- JSON -> numpy


def _type_error(value, dtype):
    name = "string" if dtype == tf.string else dtype.name
    return errors.invalid_argument(
        f"JSON Value: {_json_text(value)} Type: {_json_type(value)} "
        f"is not of expected type: {name}")


def _leaf(value, dtype):
    """Converts one JSON scalar to a value of `dtype`, or raises."""
    if dtype == tf.string:
        if isinstance(value, str):
            try:
                return value.encode("utf-8")
            except UnicodeEncodeError:  # A lone surrogate written as \udXXX.
                raise errors.invalid_argument(
                    f"JSON Value: {_json_text(value)} is not valid UTF-8") from None
        if isinstance(value, dict):
            if not _is_b64(value):
                raise errors.invalid_argument(
                    f"JSON Value: {_json_text(value)} not formatted correctly for base64 data")
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (binascii.Error, ValueError):
                raise errors.invalid_argument("Unable to base64 decode") from None
        raise _type_error(value, dtype)
    if isinstance(value, bool):
        if dtype == tf.bool:
            return value
        raise _type_error(value, dtype)
    if dtype.is_floating:
        if not isinstance(value, (int, float)):
            raise _type_error(value, dtype)
        limit_int = _FLOAT64_MAX_INT if dtype == tf.float64 else _FLOAT32_MAX_INT
        lossy = (abs(value) > limit_int if isinstance(value, int)
                 else np.isfinite(value) and abs(value) > dtype.max)
        if lossy:
            raise errors.invalid_argument(
                f"Cannot convert JSON value: {_json_text(value)} to {dtype.name} "
                "without loss of precision.")
        return value
    if dtype.is_integer:
        if not isinstance(value, int) or not dtype.min <= value <= dtype.max:
            raise _type_error(value, dtype)
        return value
    raise errors.ServingError(
        "UNIMPLEMENTED", f"Conversion of JSON Value: {_json_text(value)} to type: {dtype.name}")


def _dense_shape(value):
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _fill(value, level, shape, dtype, out):
    if not isinstance(value, list):
        if level != len(shape):
            raise errors.invalid_argument(
                f"JSON Value: {_json_text(value)} found at incorrect level: {level + 1} "
                f"in the JSON DOM. Expected at level: {len(shape)}")
        out.append(_leaf(value, dtype))
        return
    if level >= len(shape):
        raise errors.invalid_argument(
            f"Encountered list at unexpected level: {level} expected < {len(shape)}")
    if len(value) != shape[level]:
        raise errors.invalid_argument(
            f"Encountered list at unexpected size: {len(value)} at level: {level} "
            f"expected size: {shape[level]}")
    for item in value:
        _fill(item, level + 1, shape, dtype, out)


def value_to_array(value, dtype):
    """Converts a (nested list of) JSON value(s) to a dense numpy array.

    Args:
        value: a JSON scalar, b64 object, or nested lists of them.
        dtype: the `tf.DType` the signature expects.

    Returns:
        A numpy array; strings become an object array of bytes.
    """
    shape = _dense_shape(value)
    if len(shape) > _MAX_RANK:
        raise errors.invalid_argument(
            f"JSON value is nested too deeply: rank {len(shape)} > {_MAX_RANK}")
    flat = []
    try:
        _fill(value, 0, shape, dtype, flat)
    except RecursionError:
        raise errors.invalid_argument("JSON value is nested too deeply") from None
    if dtype == tf.string:
        array = np.empty(len(flat), dtype=object)
        array[:] = flat
    else:
        array = np.array(flat, dtype=dtype.as_numpy_dtype)
    return array.reshape(shape)


def _shape_text(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


def _check_size(what, shape, max_instances, max_elements):
    """Refuses a tensor of `shape` before any value is converted."""
    if shape and max_instances is not None and shape[0] > max_instances:
        raise errors.invalid_argument(
            f"{what} has {shape[0]} rows; this server accepts at most {max_instances} "
            "per request")
    count = 1
    for size in shape:
        count *= size
    if max_elements is not None and count > max_elements:
        raise errors.invalid_argument(
            f"{what} has {count} values; this server accepts at most {max_elements} "
            "per request")


def inputs_from_request(document, signature, max_instances=None, max_elements=None):
    """Reads the predict request's tensors.

    The row and value counts are read from the JSON's nesting (the first item
    of each level) and checked before anything is converted, so an oversized
    request costs no more than its parsing.

    Args:
        document: the parsed body.
        signature: the `servable.Signature` being called.
        max_instances: refuse more rows than this.
        max_elements: refuse more values than this in one input.

    Returns:
        (inputs dict {name: numpy array}, ROW or COLUMNAR).
    """
    input_specs = signature.inputs
    if not input_specs:
        raise errors.invalid_argument(
            f"Failed to get input map for signature: {signature.name}")
    has_instances, has_inputs = "instances" in document, "inputs" in document
    if has_instances and has_inputs:
        raise errors.invalid_argument(
            "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist")
    if has_instances:
        instances = document["instances"]
        if not isinstance(instances, list):
            raise errors.invalid_argument("Excepting 'instances' to be an list/array")
        if not instances:
            raise errors.invalid_argument("No values in 'instances' array")
        if max_instances is not None and len(instances) > max_instances:
            raise errors.invalid_argument(
                f"Too many instances: {len(instances)}; this server accepts at most "
                f"{max_instances} per request")
        return _rows_to_inputs(instances, input_specs, max_elements), ROW
    if has_inputs:
        return _columns_to_inputs(document["inputs"], input_specs, max_instances,
                                  max_elements), COLUMNAR
    raise errors.invalid_argument("Missing 'inputs' or 'instances' key")


def _rows_to_inputs(instances, input_specs, max_elements=None):
    def is_object(value):
        return isinstance(value, dict) and not _is_b64(value)

    objects = is_object(instances[0])
    if not objects and len(input_specs) > 1:
        raise errors.invalid_argument(
            "instances is a plain list, but expecting list of objects as multiple input "
            "tensors required as per tensorinfo_map")
    names = sorted(input_specs)
    first = instances[0]
    for name in names:
        value = first.get(name) if objects and isinstance(first, dict) else first
        _check_size(f"Input '{name}'", [len(instances)] + _dense_shape(value), None,
                    max_elements)
    rows = {name: [] for name in names}
    for index, element in enumerate(instances):
        if objects:
            if not is_object(element):
                raise errors.invalid_argument(
                    f"Expecting object but got list at item {index} of input list")
            if set(element) != set(names):
                raise errors.invalid_argument(
                    f"Failed to process element: {index} of 'instances' list. JSON object: "
                    f"{_json_text(element)} keys must be equal to: {','.join(names)}")
            items = element.items()
        else:
            if is_object(element):
                raise errors.invalid_argument(
                    f"Expecting value/list but got object at item {index} of input list")
            items = [(names[0], element)]
        for name, value in items:
            try:
                array = value_to_array(value, input_specs[name].dtype)
            except errors.ServingError as error:
                raise errors.invalid_argument(
                    f"Failed to process element: {index} key: {name} of 'instances' list. "
                    f"Error: {error.message}") from None
            if rows[name] and rows[name][0].shape != array.shape:
                raise errors.invalid_argument(
                    f"Failed to process element: {index} key: {name} of 'instances' list. "
                    f"Error: Expecting shape {_shape_text(rows[name][0].shape)} but got: "
                    f"{_shape_text(array.shape)}")
            rows[name].append(array)
    return {name: np.stack(arrays) for name, arrays in rows.items()}


def _columns_to_inputs(value, input_specs, max_instances=None, max_elements=None):
    if not isinstance(value, dict) or _is_b64(value):
        if len(input_specs) > 1:
            raise errors.invalid_argument(
                "inputs is a plain value/list, but expecting an object as multiple input "
                "tensors required as per tensorinfo_map")
        (name, spec), = input_specs.items()
        columns = {name: value}
    else:
        columns = {}
        for name in input_specs:
            if name not in value:
                raise errors.invalid_argument(f"Missing named input: {name} in 'inputs' object.")
            columns[name] = value[name]
    for name, column in columns.items():
        _check_size(f"Input '{name}'", _dense_shape(column), max_instances, max_elements)
    return {name: value_to_array(column, input_specs[name].dtype)
            for name, column in columns.items()}


# ---------------------------------------------------------------- numpy -> JSON


def _string_to_json(value, as_bytes):
    if not as_bytes:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            # TF Serving would write the raw bytes (invalid JSON); base64 keeps
            # the response valid and the value recoverable.
            pass
    return {"b64": base64.b64encode(value).decode("ascii")}


def array_to_json(name, array):
    """Converts one output array to nested JSON-ready lists/scalars."""
    array = np.asarray(array)
    if array.dtype.kind in ("O", "S"):
        as_bytes = name.endswith(_BYTES_SUFFIX)
        converted = np.empty(array.shape, dtype=object)
        flat = converted.reshape(-1)
        for i, value in enumerate(array.reshape(-1)):
            flat[i] = _string_to_json(value if isinstance(value, bytes) else bytes(value), as_bytes)
        return converted.tolist()
    if array.dtype in (np.float16, np.float32):
        # Shortest text that reads back as the same float32 (0.1, not
        # 0.10000000149011612), like TF Serving's WriteDecimal.
        return _float32_to_json(array)
    if array.dtype.kind in ("f", "i", "u", "b"):
        return array.tolist()
    raise errors.invalid_argument(f"Failed to write JSON value for tensor type: {array.dtype}")


def _float32_to_json(array):
    as_text = array.astype(np.float32).astype(str)
    return as_text.astype(np.float64).tolist()


# Values converted and written per piece of a response: between pieces other
# threads (the event loop answering status requests) get the interpreter, and the
# deadline is checked.
_VALUES_PER_PIECE = 1 << 16


def _rows_per_piece(arrays):
    values = sum(int(np.prod(np.shape(a)[1:], dtype=np.int64)) for a in arrays)
    return max(1, _VALUES_PER_PIECE // max(1, values))


def _check_deadline(deadline):
    if deadline is not None and time.monotonic() >= deadline:
        raise errors.ServingError(
            "DEADLINE_EXCEEDED", "Deadline Exceeded while encoding the response")


def _join_list(pieces):
    """`[a, b, ...]` from the JSON texts of lists' contents (empty pieces skipped)."""
    return b"[" + b", ".join(piece for piece in pieces if piece) + b"]"


def _array_bytes(name, array, deadline):
    """The JSON text of one output array, written a piece of rows at a time."""
    array = np.asarray(array)
    if array.ndim == 0:
        return dumps(array_to_json(name, array))
    if array.ndim > 1 and array[0].size > _VALUES_PER_PIECE:  # Rows too large: row by row.
        return b"[" + b", ".join(_array_bytes(name, row, deadline) for row in array) + b"]"
    step = _rows_per_piece([array])
    pieces = []
    for start in range(0, array.shape[0], step):
        _check_deadline(deadline)
        pieces.append(dumps(array_to_json(name, array[start:start + step]))[1:-1])
    return _join_list(pieces)


def predict_response_bytes(outputs, request_format, deadline=None):
    """The predict response body for the request's format, as JSON bytes.

    Written a piece of rows at a time, so that a large response neither holds
    the interpreter for long nor runs past the request's deadline.

    Args:
        outputs: dict {output name: numpy array}.
        request_format: ROW or COLUMNAR.
        deadline: monotonic time after which encoding stops (None: never).

    Returns:
        The bytes of `{"predictions": [...]}` or `{"outputs": ...}`.

    Raises:
        ServingError: INVALID_ARGUMENT for outputs the format cannot hold,
            DEADLINE_EXCEEDED past the deadline.
    """
    if not outputs:
        raise errors.invalid_argument("Cannot convert empty tensor map to JSON")
    names = sorted(outputs)
    if request_format == COLUMNAR:
        if len(names) == 1:
            return b'{"outputs": ' + _array_bytes(names[0], outputs[names[0]], deadline) + b"}"
        members = [dumps(name) + b": " + _array_bytes(name, outputs[name], deadline)
                   for name in names]
        return b'{"outputs": {' + b", ".join(members) + b"}}"
    batch_size = None
    for name in names:
        shape = np.shape(outputs[name])
        if not shape:
            raise errors.invalid_argument(f"Tensor name: {name} has no shape information ")
        if batch_size is not None and shape[0] != batch_size:
            raise errors.invalid_argument(
                f"Tensor name: {name} has inconsistent batch size: {shape[0]} "
                f"expecting: {batch_size}")
        batch_size = shape[0]
    if len(names) == 1:
        return b'{"predictions": ' + _array_bytes(names[0], outputs[names[0]], deadline) + b"}"
    step = _rows_per_piece([outputs[name] for name in names])
    pieces = []
    for start in range(0, batch_size, step):
        _check_deadline(deadline)
        columns = {name: array_to_json(name, outputs[name][start:start + step]) for name in names}
        rows = [{name: columns[name][i] for name in names} for i in range(len(columns[names[0]]))]
        pieces.append(dumps(rows)[1:-1])
    return b'{"predictions": ' + _join_list(pieces) + b"}"


def dumps(document):
    """Serializes a response; NaN and Infinity are written as TF Serving does."""
    try:
        return json.dumps(document, ensure_ascii=False, allow_nan=True).encode("utf-8")
    except UnicodeEncodeError:  # A lone surrogate echoed in an error message.
        return json.dumps(document, ensure_ascii=True, allow_nan=True).encode("ascii")


# ---------------------------------------------------------------- Classify


def _feature_kind_error(name, feature):
    kind = {"bytes_list": "bytes", "float_list": "float", "int64_list": "int64"}.get(
        feature.WhichOneof("kind"), "UNKNOWN")
    return errors.invalid_argument(
        f"Unexpected element type in feature: {name} expecting type: {kind}")


def _add_feature_value(value, name, feature):
    """Appends one JSON scalar to a `tf.train.Feature`, as TF Serving does.

    Strings and {"b64": ...} objects are bytes, booleans and whole numbers
    int64, decimals float; one feature holds one kind.
    """
    def list_of(kind):
        if feature.WhichOneof("kind") not in (None, kind):
            raise _feature_kind_error(name, feature)
        return getattr(feature, kind).value

    if value is None or isinstance(value, list) or (isinstance(value, dict)
                                                    and not _is_b64(value)):
        raise errors.invalid_argument(
            f"Feature: {name} has element with unexpected JSON type: {_json_type(value)}")
    if isinstance(value, (str, dict)):
        list_of("bytes_list").append(_leaf(value, tf.string))
    elif isinstance(value, bool):
        list_of("int64_list").append(int(value))
    elif isinstance(value, int) and -_MAX_INT64 - 1 <= value <= _MAX_INT64:
        list_of("int64_list").append(value)
    elif isinstance(value, int) and 0 < value < (1 << 64):
        raise errors.invalid_argument(
            f"Feature: {name} has uint64_t element. Only int64_t is supported.")
    else:  # A decimal, or a whole number too large for 64 bits (read as a double).
        list_of("float_list").append(float(value))


def _example_from_json(value, example):
    if not isinstance(value, dict):
        raise errors.invalid_argument(
            f"Example must be JSON object but got JSON {_json_type(value)}")
    for name, content in value.items():
        feature = example.features.feature[name]
        for item in content if isinstance(content, list) else [content]:
            _add_feature_value(item, name, feature)


def classification_input_from_request(document, max_instances=None):
    """Converts a :classify (or :regress) body to TF Serving's `Input` proto.

    Args:
        document: the parsed body: "examples", a non-empty list of objects
            {feature name: value or list of values}, and optionally "context",
            one such object shared by every example.
        max_instances: most examples accepted (None: no limit).

    Returns:
        An `input_pb2.Input` holding `example_list`, or
        `example_list_with_context` when a context was given.

    Raises:
        ServingError: INVALID_ARGUMENT saying what is wrong with the body.
    """
    request_input = input_pb2.Input()
    examples = document.get("examples")
    if examples is None:
        raise errors.invalid_argument(
            f"JSON Value: {_json_text(document)} When method is classify, key 'examples' "
            "is expected and was not found")
    if not isinstance(examples, list):
        raise errors.invalid_argument(
            f"JSON Value: {_json_text(document)} Expecting 'examples' value to be an list/array")
    if not examples:
        raise errors.invalid_argument(
            f"JSON Value: {_json_text(document)} 'examples' value is an empty array")
    if max_instances is not None and len(examples) > max_instances:
        raise errors.invalid_argument(
            f"'examples' has {len(examples)} entries; this server accepts at most "
            f"{max_instances} per request")
    if "context" in document:
        listed = request_input.example_list_with_context
        _example_from_json(document["context"], listed.context)
    else:
        listed = request_input.example_list
    for value in examples:
        _example_from_json(value, listed.examples.add())
    return request_input


def classification_result_to_json(result):
    """`{"results": [[[label, score], ...] per example]}` from a `ClassificationResult`."""
    if not result.classifications:
        raise errors.invalid_argument("Cannot convert empty ClassificationResults to JSON")
    rows = []
    for classifications in result.classifications:
        scores = _float32_to_json(np.array([c.score for c in classifications.classes],
                                           dtype=np.float32))
        rows.append([[c.label, score] for c, score in zip(classifications.classes, scores)])
    return {"results": rows}
