"""The request path shared by REST and gRPC: resolve, check, run, release.

`ServingCore` turns (model, version or label, signature, inputs) into outputs:
it takes a handle on the version, checks the inputs against the signature,
runs the call on a worker thread (or hands it to the signature's batch
scheduler), and releases the handle when the call has really finished, even
if the client's deadline expired first, so a version is never unloaded under
a running call.
"""

import asyncio
import concurrent.futures
import os

from tensorflow_serving.apis import get_model_status_pb2

from keras_transformer.serving import errors

CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"


def model_status_response(status_rows):
    """Builds a GetModelStatusResponse from `manager.VersionStatus` rows.

    Every row carries a status (OK and "" when healthy), as TF Serving's does.
    """
    response = get_model_status_pb2.GetModelStatusResponse()
    for row in status_rows:
        entry = response.model_version_status.add()
        entry.version = row.version
        entry.state = get_model_status_pb2.ModelVersionStatus.State.Value(row.state.value)
        entry.status.SetInParent()
        if row.error is not None:
            entry.status.error_code = errors.CODE_NUMBERS[row.error.code]
            entry.status.error_message = row.error.message
    return response


class ServingCore:
    """Runs requests against the versions a `ModelRegistry` holds.

    Args:
        registry: a `manager.ModelRegistry`.
        limits: `config.ServingLimits`.
        metrics: a `metrics.ServingMetrics`.
        num_threads: worker threads for model calls not handled by a batch
            scheduler.
    """

    def __init__(self, registry, limits, metrics, num_threads=None):
        self.registry = registry
        self.limits = limits
        self.metrics = metrics
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=num_threads or min(32, (os.cpu_count() or 1) + 4),
            thread_name_prefix="model-call")

    def metrics_model_name(self, name):
        """The model_name metrics label: unknown names collapse to ""."""
        return name if name in self.registry.model_names else ""

    async def predict(self, name, version, label, signature_name, make_inputs, output_filter=()):
        """Runs one predict request.

        Args:
            name: model name.
            version: integer version or None.
            label: version label or None.
            signature_name: "" for serving_default.
            make_inputs: callable(Signature) -> dict {name: numpy array}; lets
                the REST layer convert JSON with the signature's dtypes.
            output_filter: output names to return (all when empty).

        Returns:
            (version, Signature, dict {output name: numpy array}).

        Raises:
            ServingError: with the code TF Serving would answer.
        """
        handle = self.registry.acquire(name, version, label)
        try:
            signature = handle.servable.signature(signature_name)
            wanted = list(output_filter)
            for output in wanted:
                if output not in signature.outputs:
                    raise errors.invalid_argument(
                        f"output tensor alias not found in signature: {output} Outputs expected "
                        f"to be in the set {{{','.join(signature.outputs)}}}.")
            inputs = signature.check_inputs(make_inputs(signature))
            self._check_rows(inputs)
            batcher = handle.batcher(signature.name)
            if batcher is not None:
                future = batcher.submit(inputs)
            else:
                future = self.executor.submit(signature.run, inputs)
        except BaseException:
            handle.release()
            raise
        future.add_done_callback(lambda _: handle.release())
        try:
            outputs = await asyncio.wait_for(asyncio.wrap_future(future),
                                             self.limits.request_timeout_s)
        except asyncio.TimeoutError:
            raise errors.ServingError("DEADLINE_EXCEEDED", "Deadline Exceeded") from None
        except Exception as error:
            raise errors.from_exception(error) from error
        if wanted:
            outputs = {k: v for k, v in outputs.items() if k in wanted}
        return handle.version, signature, outputs

    def _check_rows(self, inputs):
        for name, array in inputs.items():
            if array.ndim and array.shape[0] > self.limits.max_instances:
                raise errors.invalid_argument(
                    f"Input '{name}' has {array.shape[0]} rows; this server accepts at most "
                    f"{self.limits.max_instances} per request")

    def metadata(self, name, version, label):
        """Returns (version, SignatureDefMap proto) of the requested version."""
        with self.registry.acquire(name, version, label) as handle:
            return handle.version, handle.servable.signature_def_map

    def check_method(self, name, version, label, signature_name, method):
        """Classify/Regress: find the signature and check its method name.

        TF2 SavedModels only carry predict signatures, so for them this raises
        INVALID_ARGUMENT with TF Serving's message; a genuine classify or
        regress signature gets UNIMPLEMENTED (this server only predicts).
        """
        kind = "classification" if method == CLASSIFY_METHOD else "regression"
        with self.registry.acquire(name, version, label) as handle:
            key = signature_name or "serving_default"
            signature_def = handle.servable.signature_def_map.signature_def.get(key)
            if signature_def is None:
                raise errors.invalid_argument(f"No signature was found with the name: {key}")
            if signature_def.method_name != method:
                raise errors.invalid_argument(
                    f"Expected {kind} signature method_name to be {method}. "
                    f"Was: {signature_def.method_name}")
        raise errors.ServingError(
            "UNIMPLEMENTED", f"{kind.capitalize()} signatures are not supported by this server")

    def shutdown(self):
        self.executor.shutdown(wait=False, cancel_futures=True)
