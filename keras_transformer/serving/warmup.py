"""Warmup: replay recorded requests on a new version before it serves.

TF Serving reads `<version>/assets.extra/tf_serving_warmup_requests`, a
TFRecord file of serialized `PredictionLog`s, and runs each request once
while the version is LOADING, so the first real client does not pay for
lazy initialization. A warmup request that fails fails the load. Predict and
Classify logs are replayed (the two APIs this server runs).
"""

import os

import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from keras_transformer.serving import classifier
from keras_transformer.serving import errors

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
_REPLAYED_LOGS = ("predict_log", "classify_log")
MAX_WARMUP_RECORDS = 1000  # TF Serving's limit.


def warmup_path(export_dir):
    return os.path.join(export_dir, WARMUP_FILE)


def read_warmup_requests(export_dir):
    """Reads the requests recorded for warmup.

    Args:
        export_dir: a version folder.

    Returns:
        A list of `PredictRequest`s and `ClassificationRequest`s (empty when the
        file does not exist).

    Raises:
        ServingError: INVALID_ARGUMENT for an unreadable file, more than 1000
            records, or a log that is neither a predict nor a classify log.
    """
    path = warmup_path(export_dir)
    if not os.path.exists(path):
        return []
    requests = []
    try:
        for record in tf.data.TFRecordDataset(path):
            if len(requests) >= MAX_WARMUP_RECORDS:
                raise errors.invalid_argument(
                    f"Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS}) "
                    f"at {path}")
            log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
            kind = log.WhichOneof("log_type")
            if kind not in _REPLAYED_LOGS:
                raise errors.invalid_argument(f"Unsupported log_type for warmup: {kind}")
            requests.append(getattr(log, kind).request)
    except errors.ServingError:
        raise
    except Exception as error:  # Corrupt record, truncated file, bad proto.
        raise errors.invalid_argument(f"Failed to read warmup data at {path}: {error}") from error
    return requests


def _classify_once(servable, request, iterations, method_name_check):
    signature = classifier.find_signature(servable, request.model_spec.signature_name,
                                          method_name_check)
    checked = classifier.signature_inputs(signature, request.input)
    for _ in range(iterations):
        classifier.classification_result(signature.run(checked), len(checked[classifier.INPUTS]))


def run_warmup(servable, tensor_from_proto, iterations=1, method_name_check=False):
    """Runs every recorded request against a freshly loaded servable.

    Args:
        servable: a `servable.Servable`.
        tensor_from_proto: callable(TensorProto) -> numpy array, the same
            conversion the gRPC API uses.
        iterations: times each request runs.
        method_name_check: as the server's Classify (see `classifier`).

    Returns:
        The number of requests run.

    Raises:
        ServingError: from reading the file or from the first failing request.
    """
    requests = read_warmup_requests(servable.export_dir)
    for request in requests:
        if request.DESCRIPTOR.name == "ClassificationRequest":
            _classify_once(servable, request, iterations, method_name_check)
            continue
        signature = servable.signature(request.model_spec.signature_name)
        inputs = {name: tensor_from_proto(proto) for name, proto in request.inputs.items()}
        checked = signature.check_inputs(inputs)
        for _ in range(iterations):
            signature.run(checked)
    return len(requests)
