"""Errors carried through the server with TF Serving's status codes.

Every failure a request can meet is raised as a `ServingError` holding a
canonical code name (the `tensorflow.error.Code` names TF Serving reports);
REST maps it to an HTTP status with `http_status`, gRPC to a `grpc.StatusCode`.
"""

import grpc

# Canonical code name -> HTTP status, as TF Serving's REST layer maps them
# (model_servers/http_rest_api_util.cc / net_http status mapping).
_HTTP_STATUS = {
    "OK": 200,
    "CANCELLED": 499,
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "PERMISSION_DENIED": 403,
    "UNAUTHENTICATED": 401,
    "RESOURCE_EXHAUSTED": 429,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
    "UNKNOWN": 500,
    "INTERNAL": 500,
    "DATA_LOSS": 500,
}

# Integer values of tensorflow/core/protobuf/error_codes.proto, for StatusProto.
CODE_NUMBERS = {
    "OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5, "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9,
    "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13,
    "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}
CODE_NAMES = {number: name for name, number in CODE_NUMBERS.items()}


class ServingError(Exception):
    """A request failure with a canonical status code.

    Args:
        code: a canonical code name such as "INVALID_ARGUMENT".
        message: the text returned to the client as `{"error": message}`.
        http_status: overrides the code's usual HTTP status (e.g. 413 for a
            body over the size limit, which a client must not simply retry).
    """

    def __init__(self, code, message, http_status=None):
        super().__init__(message)
        if code not in CODE_NUMBERS:
            raise ValueError(f"Unknown status code {code!r}")
        self.code = code
        self.message = message
        self._http_status = http_status

    @property
    def http_status(self):
        return self._http_status or _HTTP_STATUS[self.code]

    @property
    def grpc_code(self):
        return getattr(grpc.StatusCode, self.code)


def invalid_argument(message):
    return ServingError("INVALID_ARGUMENT", message)


def not_found(message):
    return ServingError("NOT_FOUND", message)


def from_exception(error):
    """Wraps any exception raised while running a model as a ServingError.

    TensorFlow's own errors keep their code (a bad input value inside the graph
    is INVALID_ARGUMENT, as in TF Serving), and so does their message when it
    quotes bytes that are not UTF-8; argument-binding errors are
    INVALID_ARGUMENT; anything else is INTERNAL.
    """
    if isinstance(error, ServingError):
        return error
    import tensorflow as tf  # Deferred: keeps this module cheap to import.

    if isinstance(error, tf.errors.OpError):
        name = CODE_NAMES.get(error.error_code, "UNKNOWN")
        return ServingError(name, error.message)
    if isinstance(error, UnicodeDecodeError) and isinstance(error.object, bytes):
        # TensorFlow could not decode its own error message, which quotes the
        # request's bytes (a parse op's "Could not parse example input, value:
        # '...'"): the message itself says what failed.
        return invalid_argument(error.object.decode("utf-8", errors="backslashreplace"))
    if isinstance(error, (TypeError, ValueError)):
        return invalid_argument(str(error))
    return ServingError("INTERNAL", f"{type(error).__name__}: {error}")
