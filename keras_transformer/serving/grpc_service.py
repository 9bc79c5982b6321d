"""TF Serving's gRPC API (PredictionService, ModelService) on grpc.aio.

The servicers subclass the classes generated in `tensorflow_serving.apis`, so
the official stubs (`PredictionServiceStub`, `ModelServiceStub`) work
unchanged. Errors are returned as gRPC status codes with TF Serving's
messages; a bug in this server is INTERNAL, never a crash.
"""

import asyncio
import logging
import time

import grpc
from google.protobuf import message as protobuf_message
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import inference_pb2
from tensorflow_serving.apis import model_management_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc
from tensorflow_serving.apis import regression_pb2

from keras_transformer.serving import classifier
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import errors
from keras_transformer.serving import inference
from keras_transformer.serving import tensors

_log = logging.getLogger(__name__)


def _version_choice(model_spec):
    """(version, label) requested by a ModelSpec; both None means latest."""
    choice = model_spec.WhichOneof("version_choice")
    if choice == "version":
        return model_spec.version.value, None
    if choice == "version_label":
        return None, model_spec.version_label
    return None, None


class _Servicer:
    """Shared error mapping and metrics for both services."""

    def __init__(self, core):
        self._core = core

    async def _answer(self, api, model_name, context, compute):
        """Runs `compute()` and maps any failure to a gRPC status."""
        started = time.monotonic()
        status, failure = "CANCELLED", None  # Stays CANCELLED if the client goes away.
        try:
            response = await compute()
            status = "OK"
            return response
        except errors.ServingError as error:
            failure = error
        except Exception:  # A bug must become INTERNAL, not a dropped call.
            _log.exception("Internal error in %s", api)
            failure = errors.ServingError("INTERNAL", "Internal server error")
        finally:
            if failure is not None:
                status = failure.code
            self._core.metrics.record_request(
                self._core.metrics_model_name(model_name), api, "GRPC", status,
                time.monotonic() - started)
        await context.abort(failure.grpc_code, failure.message)


class PredictionService(_Servicer, prediction_service_pb2_grpc.PredictionServiceServicer):
    """Predict, Classify and GetModelMetadata; Regress answers as for a
    SavedModel without regression signatures; MultiInference is unimplemented."""

    async def Predict(self, request, context):
        spec = request.model_spec
        core = self._core
        deadline = core.deadline(context.time_remaining())

        def decode():  # On a decode thread: converting large tensors takes a while.
            version, label = _version_choice(spec)
            target = core.resolve(spec.name, version, label, spec.signature_name,
                                  request.output_filter)
            with target.release_on_error():
                inputs = {name: tensors.tensor_from_proto(proto, core.limits.max_elements,
                                                          core.limits.max_tensor_bytes)
                          for name, proto in request.inputs.items()}
                inputs = target.signature.check_inputs(inputs)
            return target, inputs

        def encode(target, outputs):
            response = predict_pb2.PredictResponse()
            response.model_spec.name = spec.name
            response.model_spec.version.value = target.version
            response.model_spec.signature_name = target.signature.name
            for name, value in outputs.items():
                response.outputs[name].CopyFrom(tensors.tensor_to_proto(value))
            return response

        async def compute():
            target, inputs = await core.decode(decode)
            outputs = await core.infer(target, inputs, deadline)
            return await core.encode(encode, deadline, target, outputs)

        return await self._answer("predict", spec.name, context, compute)

    async def GetModelMetadata(self, request, context):
        spec = request.model_spec

        async def compute():
            if not request.metadata_field:
                raise errors.invalid_argument(
                    "GetModelMetadataRequest must specify at least one metadata_field")
            for field in request.metadata_field:
                if field != "signature_def":
                    raise errors.invalid_argument(f"Metadata field {field} is not supported")
            version, label = _version_choice(spec)
            resolved, signature_def_map = self._core.metadata(spec.name, version, label)
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.model_spec.name = spec.name
            response.model_spec.version.value = resolved
            response.metadata["signature_def"].Pack(signature_def_map)
            return response

        return await self._answer("GetModelMetadata", spec.name, context, compute)

    async def Classify(self, request, context):
        spec = request.model_spec
        core = self._core
        deadline = core.deadline(context.time_remaining())

        def decode():  # On a decode thread: serializing many examples takes a while.
            if not request.HasField("model_spec"):
                raise errors.invalid_argument("Missing ModelSpec")
            version, label = _version_choice(spec)
            target = core.resolve_classification(spec.name, version, label, spec.signature_name)
            with target.release_on_error():
                inputs = classifier.signature_inputs(target.signature, request.input,
                                                     core.limits.max_tensor_bytes)
            return target, inputs

        def encode(target, outputs, num_examples):
            response = classification_pb2.ClassificationResponse()
            response.model_spec.name = spec.name
            response.model_spec.version.value = target.version
            response.model_spec.signature_name = target.signature.name
            response.result.CopyFrom(classifier.classification_result(outputs, num_examples))
            return response

        async def compute():
            target, inputs = await core.decode(decode)
            outputs = await core.infer(target, inputs, deadline)
            return await core.encode(encode, deadline, target, outputs,
                                     len(inputs[classifier.INPUTS]))

        return await self._answer("classify", spec.name, context, compute)

    async def Regress(self, request, context):
        spec = request.model_spec

        async def compute():
            version, label = _version_choice(spec)
            self._core.check_regression(spec.name, version, label, spec.signature_name)

        return await self._answer("regress", spec.name, context, compute)

    async def MultiInference(self, request, context):
        async def compute():
            raise errors.ServingError(
                "UNIMPLEMENTED", "MultiInference is not supported by this server")

        return await self._answer("MultiInference", "", context, compute)


class ModelService(_Servicer, model_service_pb2_grpc.ModelServiceServicer):
    """GetModelStatus, and HandleReloadConfigRequest when enabled.

    Args:
        core: the `inference.ServingCore`.
        allow_config_reload: whether clients may replace the model list; off
            by default because it lets any client choose folders to load.
    """

    def __init__(self, core, allow_config_reload=False):
        super().__init__(core)
        self._allow_config_reload = allow_config_reload

    async def GetModelStatus(self, request, context):
        spec = request.model_spec

        async def compute():
            version, label = _version_choice(spec)
            return inference.model_status_response(
                self._core.registry.status(spec.name, version, label))

        return await self._answer("GetModelStatus", spec.name, context, compute)

    async def HandleReloadConfigRequest(self, request, context):
        async def compute():
            if not self._allow_config_reload:
                raise errors.ServingError(
                    "UNIMPLEMENTED", "Model config reload is disabled on this server "
                    "(start it with --enable_model_config_reload)")
            try:
                config_lib.validate_model_config(request.config)
            except config_lib.ConfigError as error:
                raise errors.invalid_argument(str(error)) from None
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._core.executor, self._core.registry.reload_config,
                                       request.config)
            return model_management_pb2.ReloadConfigResponse()

        return await self._answer("HandleReloadConfigRequest", "", context, compute)


class _Malformed:
    """What the deserializer hands over for bytes that are not the request message."""

    def __init__(self, message_name, error):
        self.message = f"Could not parse the request as {message_name}: {error}"


def _method_handler(method, request_class, response_class):
    """A unary handler whose undecodable requests answer INVALID_ARGUMENT.

    grpc answers UNKNOWN when a request deserializer raises; this one never
    raises, and the handler turns a `_Malformed` request into the right status.
    """
    def deserialize(data):
        try:
            return request_class.FromString(data)
        except protobuf_message.DecodeError as error:
            return _Malformed(request_class.DESCRIPTOR.full_name, error)

    async def handle(request, context):
        if isinstance(request, _Malformed):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        return await method(request, context)

    return grpc.unary_unary_rpc_method_handler(
        handle, request_deserializer=deserialize,
        response_serializer=response_class.SerializeToString)


def add_services(server, core, allow_config_reload=False):
    """Registers PredictionService and ModelService on a grpc.aio server."""
    prediction = PredictionService(core)
    model = ModelService(core, allow_config_reload)
    services = {
        "tensorflow.serving.PredictionService": {
            "Predict": (prediction.Predict, predict_pb2.PredictRequest,
                        predict_pb2.PredictResponse),
            "GetModelMetadata": (prediction.GetModelMetadata,
                                 get_model_metadata_pb2.GetModelMetadataRequest,
                                 get_model_metadata_pb2.GetModelMetadataResponse),
            "Classify": (prediction.Classify, classification_pb2.ClassificationRequest,
                         classification_pb2.ClassificationResponse),
            "Regress": (prediction.Regress, regression_pb2.RegressionRequest,
                        regression_pb2.RegressionResponse),
            "MultiInference": (prediction.MultiInference, inference_pb2.MultiInferenceRequest,
                               inference_pb2.MultiInferenceResponse),
        },
        "tensorflow.serving.ModelService": {
            "GetModelStatus": (model.GetModelStatus, get_model_status_pb2.GetModelStatusRequest,
                               get_model_status_pb2.GetModelStatusResponse),
            "HandleReloadConfigRequest": (model.HandleReloadConfigRequest,
                                          model_management_pb2.ReloadConfigRequest,
                                          model_management_pb2.ReloadConfigResponse),
        },
    }
    server.add_generic_rpc_handlers([
        grpc.method_handlers_generic_handler(
            service, {name: _method_handler(*spec) for name, spec in methods.items()})
        for service, methods in services.items()])


def grpc_server_options(max_message_bytes, idle_timeout_s=None):
    """Channel options bounding message sizes both ways, and idle connections."""
    options = [("grpc.max_receive_message_length", max_message_bytes),
               ("grpc.max_send_message_length", max(max_message_bytes, 64 * 1024 * 1024)),
               ("grpc.so_reuseport", 0)]
    if idle_timeout_s:
        options.append(("grpc.max_connection_idle_ms", int(idle_timeout_s * 1000)))
    return options

