"""TensorProto <-> numpy, guarded against requests that would blow up memory."""

import tensorflow as tf

from keras_transformer.serving import budgets
from keras_transformer.serving import errors

# A TensorProto may hold one value and a huge shape (the value is broadcast);
# refuse element counts beyond this before allocating anything.
MAX_ELEMENTS = 1 << 24


def _decoded_bytes(proto, count):
    """Bytes the array decoded from `proto` will hold, from the proto alone.

    A proto may give fewer values than its shape (the last one is repeated),
    so the count comes from the shape.
    """
    dtype = tf.dtypes.as_dtype(proto.dtype)
    if dtype == tf.string:
        values = proto.string_val
        if not values:
            return 0
        return sum(len(v) for v in values) + (count - len(values)) * max(0, len(values[-1]))
    return count * dtype.size


def tensor_from_proto(proto, max_elements=MAX_ELEMENTS, max_bytes=None):
    """Converts a request `TensorProto` to a numpy array.

    Args:
        proto: the `TensorProto`.
        max_elements: refuse more values than this.
        max_bytes: refuse a decoded array of more bytes than this (None: no
            limit), counted before anything is allocated.

    Raises:
        ServingError: INVALID_ARGUMENT for an unknown rank, negative sizes, too
            many elements, or contents that do not match the shape;
            RESOURCE_EXHAUSTED for more than `max_bytes`.
    """
    shape = proto.tensor_shape
    if shape.unknown_rank:
        raise errors.invalid_argument("Input tensor has unknown rank")
    count = 1
    for dim in shape.dim:
        if dim.size < 0:
            raise errors.invalid_argument(f"Input tensor has a negative dimension {dim.size}")
        count *= dim.size
        if count > max_elements:
            raise errors.invalid_argument(
                f"Input tensor has more than {max_elements} elements")
    if max_bytes is not None:
        try:
            size = _decoded_bytes(proto, count)
        except (TypeError, ValueError) as error:  # An unknown dtype.
            raise errors.invalid_argument(f"Malformed input tensor: {error}") from None
        if size > max_bytes:
            raise budgets.request_too_large("An input tensor's values", size, max_bytes)
    try:
        return tf.make_ndarray(proto)
    except Exception as error:  # TypeError, ValueError from malformed contents.
        raise errors.invalid_argument(f"Malformed input tensor: {error}") from error


def tensor_to_proto(array):
    """Converts an output array to a `TensorProto` (strings stay bytes)."""
    return tf.make_tensor_proto(array)
