"""A small client for TF Serving's REST and gRPC APIs (ours or stock).

Example:
    client = TranslationClient("http://127.0.0.1:8501", model_name="zh_en")
    client.translate(["你好。"])           # -> ["Hello."]
    grpc_client = TranslationClient("127.0.0.1:8500", model_name="zh_en")
"""

import base64
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request

import numpy as np


class ServingError(RuntimeError):
    """An error answer from the server.

    Attributes:
        code: HTTP status (REST) or `grpc.StatusCode` name (gRPC).
        message: the server's message.
    """

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ModelNotFoundError(ServingError, ValueError):
    """The server answered 404 / NOT_FOUND: no such model (or version) there.

    A ValueError too, since it is the caller's model name that is wrong.
    """


class ServerUnreachableError(ConnectionError):
    """Nothing answers at the client's target: nothing listens on that port,
    the host does not resolve, or the address is malformed."""


def _not_found(client, code, message):
    what = f"model {client.model_name!r}"
    if client.version is not None:
        what += f" version {client.version}"
    elif client.version_label is not None:
        what += f" label {client.version_label!r}"
    return ModelNotFoundError(code, f"{what} is not served at {client.target} ({message})")


def _unreachable(client, reason):
    return ServerUnreachableError(
        f"Cannot reach a model server at {client.target!r} ({client.protocol.upper()}): {reason}")


# Signature dtypes -> numpy, so REST answers match gRPC's arrays without TensorFlow.
_NUMPY_DTYPES = {
    "DT_FLOAT": np.float32, "DT_DOUBLE": np.float64, "DT_HALF": np.float16,
    "DT_INT8": np.int8, "DT_INT16": np.int16, "DT_INT32": np.int32, "DT_INT64": np.int64,
    "DT_UINT8": np.uint8, "DT_UINT16": np.uint16, "DT_UINT32": np.uint32,
    "DT_UINT64": np.uint64, "DT_BOOL": np.bool_,
}


def _is_b64(value):
    return isinstance(value, dict) and set(value) == {"b64"}


def _from_json(value):
    """JSON output values -> numpy; strings become bytes, as gRPC gives them."""
    def convert(item):
        if isinstance(item, list):
            return [convert(x) for x in item]
        if _is_b64(item):
            return base64.b64decode(item["b64"])
        if isinstance(item, str):
            return item.encode("utf-8")
        return item

    converted = convert(value)
    shape_probe = np.array(converted, dtype=object)
    if shape_probe.size and all(isinstance(x, bytes) for x in shape_probe.flat):
        return shape_probe
    return np.array(converted)


def _to_json(array):
    array = np.asarray(array)
    if array.dtype.kind in ("U", "S", "O"):
        def convert(item):
            if isinstance(item, list):
                return [convert(x) for x in item]
            if isinstance(item, bytes):
                try:
                    return item.decode("utf-8")
                except UnicodeDecodeError:
                    return {"b64": base64.b64encode(item).decode("ascii")}
            return str(item)
        return convert(array.tolist())
    return array.tolist()


def _datatype_enum(name):
    from tensorflow.core.framework import types_pb2

    return types_pb2.DataType.Value(name)


class ServingClient:
    """Calls one model's signatures over REST or gRPC.

    Args:
        target: "http://host:8501" (REST) or "host:8500" (gRPC).
        model_name: the served model's name.
        signature_name: the signature to call by default.
        version: pin a version (int), or None for the latest.
        version_label: pin a label instead of a version.
        timeout: seconds per call.
    """

    def __init__(self, target, model_name, signature_name="serving_default", version=None,
                 version_label=None, timeout=30.0):
        if version is not None and version_label is not None:
            raise ValueError("Give version or version_label, not both")
        self.target = target
        self.model_name = model_name
        self.signature_name = signature_name
        self.version = version
        self.version_label = version_label
        self.timeout = timeout
        self.protocol = "rest" if target.startswith(("http://", "https://")) else "grpc"
        self._stub = None
        self._channel = None
        self._signatures = {}

    # ------------------------------------------------------------------ public

    def predict(self, inputs, signature_name=None):
        """Runs a signature.

        Args:
            inputs: dict {input name: array-like}; strings may be str or bytes.
            signature_name: overrides the client's default signature.

        Returns:
            dict {output name: numpy array}; string outputs are bytes.
        """
        signature_name = signature_name or self.signature_name
        if self.protocol == "rest":
            return self._predict_rest(inputs, signature_name)
        return self._predict_grpc(inputs, signature_name)

    def metadata(self):
        """The model's signatures as a dict (REST metadata document shape)."""
        if self.protocol == "rest":
            return self._get_json(self._model_url() + "/metadata")
        from google.protobuf import json_format
        from tensorflow_serving.apis import get_model_metadata_pb2

        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        self._fill_spec(request.model_spec, "")
        response = self._call(self._prediction_stub().GetModelMetadata, request)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_map)
        return {"model_spec": json_format.MessageToDict(response.model_spec,
                                                        preserving_proto_field_name=True),
                "metadata": {"signature_def": json_format.MessageToDict(
                    signature_map, preserving_proto_field_name=True)}}

    def status(self):
        """The model's version status list, as REST returns it."""
        if self.protocol == "rest":
            return self._get_json(self._model_url())
        from google.protobuf import json_format
        from tensorflow_serving.apis import get_model_status_pb2

        request = get_model_status_pb2.GetModelStatusRequest()
        self._fill_spec(request.model_spec, None)
        response = self._call(self._model_stub().GetModelStatus, request)
        return json_format.MessageToDict(response, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)

    def close(self):
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -------------------------------------------------------------------- REST

    def _model_url(self):
        url = f"{self.target.rstrip('/')}/v1/models/{urllib.parse.quote(self.model_name)}"
        if self.version is not None:
            url += f"/versions/{int(self.version)}"
        elif self.version_label is not None:
            url += f"/labels/{urllib.parse.quote(self.version_label)}"
        return url

    def _http(self, request):
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            body = error.read()
            try:
                message = json.loads(body)["error"]
            except (ValueError, KeyError, TypeError):
                message = body.decode("utf-8", "replace")
            if error.code == 404:
                raise _not_found(self, error.code, message) from None
            raise ServingError(error.code, message) from None
        except urllib.error.URLError as error:  # Refused, unknown host, no host.
            raise _unreachable(self, error.reason) from None
        except (http.client.InvalidURL, ConnectionError, OverflowError) as error:  # Bad port.
            raise _unreachable(self, error) from None

    def _get_json(self, url):
        return self._http(urllib.request.Request(url, method="GET"))

    def _predict_rest(self, inputs, signature_name):
        body = {"signature_name": signature_name,
                "inputs": {name: _to_json(value) for name, value in inputs.items()}}
        request = urllib.request.Request(
            self._model_url() + ":predict", data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"}, method="POST")
        outputs = self._http(request)["outputs"]
        specs = self._signature(signature_name)["outputs"]
        if not isinstance(outputs, dict) or _is_b64(outputs):
            # A single output comes back unnamed; its name is in the metadata.
            outputs = {sorted(specs)[0]: outputs}
        arrays = {}
        for name, value in outputs.items():
            array = _from_json(value)
            dtype = _NUMPY_DTYPES.get(specs.get(name, {}).get("dtype"))
            arrays[name] = array.astype(dtype) if dtype is not None else array
        return arrays

    def _signature(self, signature_name):
        """The signature's metadata dict, fetched once per signature."""
        if signature_name not in self._signatures:
            signatures = self.metadata()["metadata"]["signature_def"]["signature_def"]
            if signature_name not in signatures:
                raise ServingError("NOT_FOUND", f"No signature {signature_name!r}")
            self._signatures[signature_name] = signatures[signature_name]
        return self._signatures[signature_name]

    # -------------------------------------------------------------------- gRPC

    def _connect(self):
        if self._channel is None:
            import grpc

            self._channel = grpc.insecure_channel(
                self.target, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])
        return self._channel

    def _prediction_stub(self):
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        return prediction_service_pb2_grpc.PredictionServiceStub(self._connect())

    def _model_stub(self):
        from tensorflow_serving.apis import model_service_pb2_grpc

        return model_service_pb2_grpc.ModelServiceStub(self._connect())

    def _fill_spec(self, spec, signature_name):
        spec.name = self.model_name
        if signature_name is not None:
            spec.signature_name = signature_name
        if self.version is not None:
            spec.version.value = int(self.version)
        elif self.version_label is not None:
            spec.version_label = self.version_label

    def _call(self, method, request):
        import grpc

        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            code, details = error.code(), error.details() or ""
            if code == grpc.StatusCode.NOT_FOUND:
                raise _not_found(self, code.name, details) from None
            if code == grpc.StatusCode.UNAVAILABLE and any(
                    word in details.lower() for word in ("connect", "resolv", "address", "dns")):
                raise _unreachable(self, details) from None
            raise ServingError(code.name, details) from None

    def _predict_grpc(self, inputs, signature_name):
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        request = predict_pb2.PredictRequest()
        self._fill_spec(request.model_spec, signature_name)
        # gRPC tensors carry a dtype that must match the signature's exactly
        # (Python ints would travel as int64), so cast to what it declares.
        specs = self._signature(signature_name)["inputs"]
        for name, value in inputs.items():
            array = np.asarray(value)
            if array.dtype.kind == "U":
                array = np.vectorize(lambda s: s.encode("utf-8"), otypes=[object])(array)
            dtype = specs.get(name, {}).get("dtype")
            dtype = tf.dtypes.as_dtype(_datatype_enum(dtype)) if dtype else None
            request.inputs[name].CopyFrom(tf.make_tensor_proto(array, dtype=dtype))
        response = self._call(self._prediction_stub().Predict, request)
        return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}


class TranslationClient(ServingClient):
    """Sends sentences to a translation signature and returns sentences.

    Args:
        target: "http://host:8501" or "host:8500".
        model_name: e.g. "zh_en".
        input_name: the signature's text input.
        output_name: the signature's translated-text output.
        **kwargs: see `ServingClient`.
    """

    def __init__(self, target, model_name="zh_en", input_name="text",
                 output_name="translation", **kwargs):
        super().__init__(target, model_name, **kwargs)
        self.input_name = input_name
        self.output_name = output_name

    def translate(self, texts, signature_name=None):
        """Translates a list of strings; returns a list of strings."""
        if isinstance(texts, str):
            raise TypeError("translate() takes a list of strings")
        if not texts:
            return []
        outputs = self.predict({self.input_name: [t.encode("utf-8") for t in texts]},
                               signature_name)
        translations = np.asarray(outputs[self.output_name]).reshape(-1)
        return [value.decode("utf-8") for value in translations]
