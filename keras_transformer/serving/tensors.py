"""TensorProto <-> numpy, guarded against requests that would blow up memory."""

import tensorflow as tf

from keras_transformer.serving import errors

# A TensorProto may hold one value and a huge shape (the value is broadcast);
# refuse element counts beyond this before allocating anything.
MAX_ELEMENTS = 1 << 24


def tensor_from_proto(proto, max_elements=MAX_ELEMENTS):
    """Converts a request `TensorProto` to a numpy array.

    Raises:
        ServingError: INVALID_ARGUMENT for an unknown rank, negative sizes, too
            many elements, or contents that do not match the shape.
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
    try:
        return tf.make_ndarray(proto)
    except Exception as error:  # TypeError, ValueError from malformed contents.
        raise errors.invalid_argument(f"Malformed input tensor: {error}") from error


def tensor_to_proto(array):
    """Converts an output array to a `TensorProto` (strings stay bytes)."""
    return tf.make_tensor_proto(array)
