"""TF Serving's REST API on aiohttp.

Routes (case-insensitive, as in TF Serving; version and label are exclusive):
    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]            model status
    GET  /v1/models/{name}[/versions/{v}|/labels/{l}]/metadata   signatures
    POST /v1/models/{name}[/versions/{v}|/labels/{l}]:predict    (also :classify, :regress)
    GET  <prometheus path>                                       metrics text
    GET  /  and  /<file>                                         the model page (static
                                                                 files), unless turned off
    GET  /config.json                                            {"model", "models"} for the page

Every failure is answered `{"error": "..."}` with TF Serving's status code;
only a bug in this server gives 500.
"""

import asyncio
import logging
import os
import re
import time

import aiohttp
from aiohttp import web
from google.protobuf import json_format
from tensorflow_serving.apis import model_pb2

from keras_transformer.serving import classifier
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import errors
from keras_transformer.serving import inference
from keras_transformer.serving import json_tensor
from keras_transformer.serving import metrics as metrics_lib

_log = logging.getLogger(__name__)

# [0-9], not \d: TF Serving reads only ASCII digits (\d also matches "١").
_VERSION_OR_LABEL = r"(?:/versions/([0-9]+)|/labels/([^/:]+))?"
_PREDICTION_PATH = re.compile(
    r"/v1/models/([^/:]+)" + _VERSION_OR_LABEL + r":(classify|regress|predict)", re.IGNORECASE)
_STATUS_PATH = re.compile(
    r"/v1/models(?:/([^/:]+))?" + _VERSION_OR_LABEL + r"(/metadata)?", re.IGNORECASE)
_MAX_INT64 = 2**63 - 1
_JSON = "application/json"


def _parse_version(text):
    if text is None:
        return None
    # Checked by length first: int() refuses more than 4300 digits with a ValueError.
    if len(text.lstrip("0")) > len(str(_MAX_INT64)) or int(text) > _MAX_INT64:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise errors.invalid_argument(f"Failed to convert version: {shown} to numeric.")
    return int(text)


def _json_response(document, status=200):
    return web.Response(body=json_tensor.dumps(document), status=status, content_type=_JSON)


def _error_response(error):
    return _json_response({"error": error.message}, status=error.http_status)


def model_status_json(status_rows):
    """The GetModelStatusResponse, printed as TF Serving prints it."""
    response = inference.model_status_response(status_rows)
    return json_format.MessageToDict(
        response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def model_metadata_json(name, version, signature_def_map):
    """The REST metadata document: model_spec plus the SignatureDefMap."""
    spec = model_pb2.ModelSpec(name=name)
    spec.version.value = version
    return {
        "model_spec": json_format.MessageToDict(
            spec, preserving_proto_field_name=True, always_print_fields_with_no_presence=True),
        "metadata": {"signature_def": json_format.MessageToDict(
            signature_def_map, preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True)},
    }


def _one_line(text, limit=300):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


class _Connection(web.RequestHandler):
    """aiohttp's connection handler; a request it cannot parse (a bad or repeated
    Content-Length, oversized headers, ...) is answered `{"error": ...}` and
    logged as one line, so bad requests can neither confuse clients that read
    JSON nor flood the log with tracebacks."""

    def handle_error(self, request, status=500, exc=None, message=None):
        if request.writer.output_size > 0:  # Headers already sent: nothing can be answered.
            raise ConnectionError("Response is sent already, cannot send an error response")
        if status >= 500:  # Not the client's fault: a bug here, worth its traceback.
            _log.error("Internal error answering a request from %s", request.remote,
                       exc_info=exc)
            text = "Internal server error"
        else:
            reason = _one_line(getattr(exc, "message", None) or message or status)
            _log.warning("Malformed HTTP request from %s: %s", request.remote, reason)
            text = f"Malformed HTTP request: {reason}"
        response = _json_response({"error": text}, status=status)
        response.force_close()
        return response


class _Server(web.Server):
    """aiohttp's low-level server with `_Connection` handling each connection.

    A client that disconnects cancels its handler, so the model call it was
    waiting for stops at its next slice instead of running to the deadline.
    """

    def __init__(self, handler, **connection_options):
        super().__init__(handler, handler_cancellation=True)
        self._connection_options = connection_options

    def __call__(self):
        return _Connection(self, loop=asyncio.get_running_loop(), **self._connection_options)


class RestApi:
    """The REST server of one `ModelServer`.

    Args:
        core: the `inference.ServingCore`.
        metrics_path: where Prometheus metrics are served, or None.
        static_dir: folder whose index.html is served at "/" and whose other
            top-level files at "/<name>" (None: no page).
    """

    def __init__(self, core, metrics_path=config_lib.DEFAULT_METRICS_PATH, static_dir=None):
        self.core = core
        self.metrics_path = metrics_path
        self.static_dir = static_dir

    def make_server(self):
        """The `aiohttp.web.Server` to run (with `web.ServerRunner`)."""
        return _Server(self._handle, access_log=None,
                       keepalive_timeout=self.core.limits.idle_timeout_s)

    async def _handle(self, request):
        try:
            return await self._route(request)
        except Exception:  # A bug here must not take the server down.
            _log.exception("Internal error answering %s %s", request.method, request.path)
            return _json_response({"error": "Internal server error"}, status=500)

    async def _route(self, request):
        path = request.path
        if request.method in ("GET", "HEAD"):
            if self.metrics_path and path == self.metrics_path:
                return self._metrics()
            if self.static_dir and path == "/":
                return self._index()
            name = path[1:]
            # One path segment: never shadows /v1/... (a miss falls through to it).
            if self.static_dir and name and "/" not in name:
                page_file = self._page_file(name)
                if page_file is not None:
                    return page_file
        if path.lower() == "/v1" or path.lower().startswith("/v1/"):
            return await self._v1(request)
        return _error_response(errors.not_found(f"Not found: {request.method} {path}"))

    def _metrics(self):
        return web.Response(body=self.core.metrics.exposition(),
                            headers={"Content-Type": metrics_lib.CONTENT_TYPE})

    def _index(self):
        index = os.path.join(self.static_dir, "index.html")
        if not os.path.isfile(index):
            return _error_response(errors.not_found("No index.html in static_dir"))
        return web.FileResponse(index)

    def _page_file(self, name):
        """A top-level file of static_dir (index.html's app.js, style.css, ...), or None."""
        path = os.path.join(self.static_dir, name)
        plain = not (name.startswith(".") or "\\" in name or os.sep in name)
        if plain and os.path.isfile(path) and not os.path.islink(path):
            return web.FileResponse(path)
        if name == "config.json":
            return _json_response(self._page_config())
        return None

    def _page_config(self):
        """What the page needs to know that TF Serving's API cannot tell: the model names."""
        names = self.core.registry.model_names
        return {"model": names[0] if names else "", "models": names}

    async def _v1(self, request):
        started = time.monotonic()
        deadline = self.core.deadline()
        path = request.path
        # Stays CANCELLED if the client disconnects and aiohttp cancels us.
        api, model_name, status = "unknown", "", "CANCELLED"
        try:
            match = _PREDICTION_PATH.fullmatch(path) if request.method == "POST" else None
            if match:
                model_name, api = match.group(1), match.group(4).lower()
                version, label = _parse_version(match.group(2)), match.group(3)
                body = await self._read_body(request, deadline)
                if api == "predict":
                    response = await self._predict(model_name, version, label, body, deadline)
                elif api == "classify":
                    response = await self._classify(model_name, version, label, body, deadline)
                else:
                    response = _json_response(
                        await self._regress(model_name, version, label, body))
            else:
                match = _STATUS_PATH.fullmatch(path) if request.method == "GET" else None
                if not match:
                    raise errors.invalid_argument(f"Malformed request: {request.method} {path}")
                model_name = match.group(1)
                if not model_name:
                    raise errors.invalid_argument("Missing model name in request.")
                version, label = _parse_version(match.group(2)), match.group(3)
                if match.group(4):
                    api = "GetModelMetadata"
                    response = _json_response(self._metadata(model_name, version, label))
                else:
                    api = "GetModelStatus"
                    response = _json_response(model_status_json(
                        self.core.registry.status(model_name, version, label)))
            status = "OK"
            return response
        except errors.ServingError as error:
            status = error.code
            return _error_response(error)
        except Exception:
            status = "INTERNAL"  # Answered 500 by `_handle`.
            raise
        finally:
            self.core.metrics.record_request(
                self.core.metrics_model_name(model_name or ""), api, "REST", status,
                time.monotonic() - started)

    async def _read_body(self, request, deadline):
        limit = self.core.limits.max_body_bytes

        def too_large(size):
            return errors.ServingError(
                "RESOURCE_EXHAUSTED", f"Request body of {size} bytes exceeds the limit of "
                f"{limit} bytes (--max_request_bytes)", http_status=413)

        if request.content_length is not None and request.content_length > limit:
            raise too_large(request.content_length)

        async def read():  # Counted as it arrives: a body without a length stops at the limit.
            chunks, size = [], 0
            async for chunk in request.content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise too_large(f"more than {limit}")
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            # A body trickling in slowly must not hold a connection past the deadline.
            return await asyncio.wait_for(read(), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise errors.ServingError(
                "DEADLINE_EXCEEDED", "Request body not received before the deadline") from None
        except (aiohttp.ClientError, ConnectionError) as error:
            # The client hung up mid-body: nobody is left to answer.
            _log.info("Client left before sending its whole request (%s %s): %s",
                      request.method, request.path, _one_line(error))
            raise errors.ServingError("CANCELLED", "Client closed the connection") from None

    async def _predict(self, model_name, version, label, body, deadline):
        limits = self.core.limits

        def decode():  # On a decode thread: parsing may take a while.
            document = json_tensor.parse_body(body)
            target = self.core.resolve(model_name, version, label,
                                       json_tensor.signature_name(document))
            with target.release_on_error():
                inputs, request_format = json_tensor.inputs_from_request(
                    document, target.signature, limits.max_instances, limits.max_elements)
                inputs = target.signature.check_inputs(inputs)
            return target, inputs, request_format

        def encode(outputs, request_format):
            return web.Response(
                body=json_tensor.predict_response_bytes(outputs, request_format, deadline),
                content_type=_JSON)

        target, inputs, request_format = await self.core.decode(decode)
        outputs = await self.core.infer(target, inputs, deadline)
        return await self.core.encode(encode, deadline, outputs, request_format)

    async def _classify(self, model_name, version, label, body, deadline):
        core = self.core

        def decode():  # On a decode thread: parsing may take a while.
            document = json_tensor.parse_body(body)
            name = json_tensor.signature_name(document)
            request_input = json_tensor.classification_input_from_request(
                document, core.limits.max_instances)
            target = core.resolve_classification(model_name, version, label, name)
            with target.release_on_error():
                inputs = classifier.signature_inputs(target.signature, request_input,
                                                     core.limits.max_tensor_bytes)
            return target, inputs

        def encode(outputs, num_examples):
            result = classifier.classification_result(outputs, num_examples)
            return _json_response(json_tensor.classification_result_to_json(result))

        target, inputs = await core.decode(decode)
        outputs = await core.infer(target, inputs, deadline)
        return await core.encode(encode, deadline, outputs, len(inputs[classifier.INPUTS]))

    async def _regress(self, model_name, version, label, body):
        document = await self.core.decode(json_tensor.parse_body, body)
        signature_name = json_tensor.signature_name(document)
        json_tensor.classification_input_from_request(document)
        self.core.check_regression(model_name, version, label, signature_name)

    def _metadata(self, model_name, version, label):
        resolved, signature_def_map = self.core.metadata(model_name, version, label)
        return model_metadata_json(model_name, resolved, signature_def_map)
