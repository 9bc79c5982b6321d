"""TF Serving's gRPC API (PredictionService, ModelService) on grpc.aio.

The servicers subclass the classes generated in `tensorflow_serving.apis`, so
the official stubs (`PredictionServiceStub`, `ModelServiceStub`) work
unchanged. Errors are returned as gRPC status codes with TF Serving's
messages; a bug in this server is INTERNAL, never a crash.
"""

import asyncio
import logging
import time

from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import model_management_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

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
    """Predict and GetModelMetadata; Classify/Regress answer as for a
    SavedModel without such signatures; MultiInference is unimplemented."""

    async def Predict(self, request, context):
        spec = request.model_spec

        async def compute():
            version, label = _version_choice(spec)
            resolved, signature, outputs = await self._core.predict(
                spec.name, version, label, spec.signature_name,
                lambda _: {name: tensors.tensor_from_proto(proto)
                           for name, proto in request.inputs.items()},
                request.output_filter)
            response = predict_pb2.PredictResponse()
            response.model_spec.name = spec.name
            response.model_spec.version.value = resolved
            response.model_spec.signature_name = signature.name
            for name, value in outputs.items():
                response.outputs[name].CopyFrom(tensors.tensor_to_proto(value))
            return response

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

    async def _classify_or_regress(self, api, method, request, context):
        spec = request.model_spec

        async def compute():
            version, label = _version_choice(spec)
            self._core.check_method(spec.name, version, label, spec.signature_name, method)

        return await self._answer(api, spec.name, context, compute)

    async def Classify(self, request, context):
        return await self._classify_or_regress(
            "classify", inference.CLASSIFY_METHOD, request, context)

    async def Regress(self, request, context):
        return await self._classify_or_regress(
            "regress", inference.REGRESS_METHOD, request, context)

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


def add_services(server, core, allow_config_reload=False):
    """Registers both services on a grpc(.aio) server."""
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(core), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(
        ModelService(core, allow_config_reload), server)


def grpc_server_options(max_message_bytes):
    """Channel options bounding message sizes both ways."""
    return [("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max(max_message_bytes, 64 * 1024 * 1024)),
            ("grpc.so_reuseport", 0)]

