"""The data plane shared by REST and gRPC: resolve, decode off the loop, infer.

An endpoint (REST or gRPC) serves a prediction in three steps, in the manner of
KServe's endpoints and data plane:

1. `ServingCore.decode(work)` runs the endpoint's decoding on a worker thread, so
   parsing a large body never stalls the event loop. Inside it the endpoint calls
   `resolve` (takes a handle on the version, finds the signature) and converts the
   request to typed tensors against that signature, checking the limits first.
2. `ServingCore.infer(target, inputs, deadline)` runs the call on the model's
   own threads (directly, or as a merged batch from the signature's batch
   scheduler), in slices of rows sized by time with the deadline checked before
   each (`budgets.sliced_call`); the model's `scheduling.SliceScheduler` lets
   its calls take turns slice by slice, so a large call never holds a thread
   until it ends. A call whose deadline passed, or whose client left, before it
   started never runs; one whose deadline passes, or whose client leaves, stops
   at its next slice. Each model has its own threads, so one model's work
   (abandoned or not) never holds the threads another model's requests need.
3. `ServingCore.encode(work, deadline, ...)` encodes the outputs on a worker
   thread, within the same deadline.

Status and metadata requests never reach these pools: they answer from the
registry on the event loop.

The handle on the version is released when the call has really finished, even
if the client's deadline expired first, so a version is never unloaded under a
running call.
"""

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time

from tensorflow_serving.apis import get_model_status_pb2

from keras_transformer.serving import budgets
from keras_transformer.serving import classifier
from keras_transformer.serving import errors
from keras_transformer.serving import scheduling

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


def _sliced_call(signature, inputs, limits, deadline, cancelled):
    # A call whose client left or whose deadline passed while it was queued
    # never starts: sliced_call asks before its first slice too.
    return budgets.sliced_call(signature, inputs, limits.max_rows_per_call,
                               limits.max_response_bytes, budgets.stopper(deadline, cancelled),
                               limits.slice_seconds)


class Target:
    """A resolved request target: a handle on one version and one signature.

    Release it exactly once: use it as a context manager (it is released on
    exit unless `ServingCore.infer` took it over) or pass it to `infer`.

    Attributes:
        version: the integer version that answers.
        signature: the `servable.Signature` to call.
        output_filter: output names to return (all when empty).
    """

    def __init__(self, handle, signature, output_filter=()):
        self._handle = handle
        self.model_name = handle.model_name
        self.version = handle.version
        self.signature = signature
        self.output_filter = tuple(output_filter)
        self._handed_over = False

    def batcher(self):
        return self._handle.batcher(self.signature.name)

    def release_when_done(self, future):
        """Keeps the version until `future` (the model call) has finished."""
        self._handed_over = True
        future.add_done_callback(lambda _: self._handle.release())

    def release(self):
        if not self._handed_over:
            self._handle.release()

    @contextlib.contextmanager
    def release_on_error(self):
        """Releases the target if the enclosed block raises (decoding failed)."""
        try:
            yield self
        except BaseException:
            self.release()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.release()


def _release_targets(future):
    """Releases the Targets a finished decode produced for a client that left."""
    if future.cancelled() or future.exception() is not None:
        return
    result = future.result()
    for item in result if isinstance(result, tuple) else (result,):
        if isinstance(item, Target):
            item.release()


class ServingCore:
    """Runs requests against the versions a `ModelRegistry` holds.

    Args:
        registry: a `manager.ModelRegistry`.
        limits: `config.ServingLimits`.
        metrics: a `metrics.ServingMetrics`.
        num_threads: threads that run model calls' slices, per model (None:
            the CPUs, at least 2).
        num_decode_threads: worker threads that parse and encode requests
            (TF Serving's --rest_api_num_threads).
        method_name_check: Classify also requires the signature's method name
            (TF Serving's --enable_signature_method_name_check).
    """

    def __init__(self, registry, limits, metrics, num_threads=None, num_decode_threads=None,
                 method_name_check=False):
        self.registry = registry
        self.limits = limits
        self.metrics = metrics
        self.method_name_check = method_name_check
        cpus = os.cpu_count() or 1
        self._threads_per_model = num_threads or max(2, cpus)
        self._schedulers = {}  # Model name -> its own SliceScheduler.
        self._schedulers_lock = threading.Lock()
        # Administrative work (config reloads): never queued behind inference.
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=2, thread_name_prefix="admin")
        self.decoder = concurrent.futures.ThreadPoolExecutor(
            max_workers=num_decode_threads or min(16, cpus * 4), thread_name_prefix="decode")
        self._in_flight = set()  # Model-call futures not yet done (shutdown drains them).
        self._in_flight_lock = threading.Lock()

    def model_scheduler(self, model_name):
        """The `SliceScheduler` that runs `model_name`'s calls, merged batches
        included (made on first use)."""
        with self._schedulers_lock:
            scheduler = self._schedulers.get(model_name)
            if scheduler is None:
                scheduler = scheduling.SliceScheduler(self._threads_per_model,
                                                      f"model-{model_name}")
                self._schedulers[model_name] = scheduler
            return scheduler

    def metrics_model_name(self, name):
        """The model_name metrics label: unknown names collapse to ""."""
        return name if name in self.registry.model_names else ""

    def deadline(self, client_seconds=None):
        """The monotonic time a request arriving now must finish by.

        Args:
            client_seconds: the client's own time budget (gRPC deadline), if any.
        """
        seconds = self.limits.request_timeout_s
        if client_seconds is not None:
            seconds = min(seconds, client_seconds)
        return time.monotonic() + seconds

    async def decode(self, work, *args):
        """Runs `work(*args)` on a decode thread and returns its result.

        Parsing and converting a request costs time proportional to its size;
        on a thread it never holds up the event loop (status requests, other
        clients). A `Target` the work returns after its client left is released.
        """
        future = self.decoder.submit(work, *args)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(_release_targets)
            raise

    async def encode(self, work, deadline, *args):
        """Runs `work(*args)` (building a response) on a decode thread, within `deadline`.

        The encoding itself is bounded by --max_response_bytes; a client whose
        deadline passes meanwhile gets DEADLINE_EXCEEDED at once.
        """
        future = self.decoder.submit(work, *args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future),
                                          max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise budgets.deadline_exceeded("Deadline Exceeded while encoding the response") from None

    def resolve(self, name, version, label, signature_name, output_filter=()):
        """Takes a handle on the requested version and finds the signature.

        Args:
            name: model name.
            version: integer version or None.
            label: version label or None.
            signature_name: "" for serving_default.
            output_filter: output names to return (all when empty).

        Returns:
            A `Target`; the caller releases it or hands it to `infer`.

        Raises:
            ServingError: with the code TF Serving would answer.
        """
        handle = self.registry.acquire(name, version, label)
        try:
            signature = handle.servable.signature(signature_name)
            for output in output_filter:
                if output not in signature.outputs:
                    raise errors.invalid_argument(
                        f"output tensor alias not found in signature: {output} Outputs expected "
                        f"to be in the set {{{','.join(signature.outputs)}}}.")
        except BaseException:
            handle.release()
            raise
        return Target(handle, signature, output_filter)

    def resolve_classification(self, name, version, label, signature_name):
        """`resolve` for Classify: the signature must have a classifier's shape.

        Raises:
            ServingError: as `resolve`, and INVALID_ARGUMENT with TF Serving's
                messages for a signature that cannot classify
                (`classifier.check_signature_def`).
        """
        handle = self.registry.acquire(name, version, label)
        try:
            signature = classifier.find_signature(handle.servable, signature_name,
                                                  self.method_name_check)
        except BaseException:
            handle.release()
            raise
        return Target(handle, signature)

    async def infer(self, target, inputs, deadline):
        """Runs one call on typed, checked inputs; takes over `target`.

        Args:
            target: from `resolve`.
            inputs: dict {name: numpy array}, already checked against
                `target.signature` (`Signature.check_inputs`).
            deadline: monotonic time (see `deadline`) after which the call
                must not start and the client gets DEADLINE_EXCEEDED.

        Returns:
            dict {output name: numpy array}, filtered by the target's filter.

        Raises:
            ServingError: with the code TF Serving would answer.
        """
        limits = self.limits
        cancelled = threading.Event()  # Set when the client stops waiting.
        with target:
            self._check_rows(inputs)
            budgets.check_request_bytes(inputs, limits.max_tensor_bytes)
            batcher = target.batcher()
            if batcher is not None:
                future = batcher.submit(inputs, deadline, cancelled)
            else:
                future = self.model_scheduler(target.model_name).submit(
                    _sliced_call(target.signature, inputs, limits, deadline, cancelled))
            target.release_when_done(future)
            self._track(future)
        try:
            # On timeout the future is cancelled: a call still queued never starts,
            # and `cancelled` stops a running one at its next slice.
            outputs = await asyncio.wait_for(asyncio.wrap_future(future),
                                             max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            cancelled.set()
            raise budgets.deadline_exceeded() from None
        except asyncio.CancelledError:
            cancelled.set()
            raise
        except Exception as error:
            raise errors.from_exception(error) from error
        if target.output_filter:
            outputs = {k: v for k, v in outputs.items() if k in target.output_filter}
        if batcher is not None:  # A merged batch's outputs are checked request by request.
            budgets.check_response_bytes(target.signature.name, outputs,
                                         limits.max_response_bytes)
        return outputs

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

    def check_regression(self, name, version, label, signature_name):
        """Regress: find the signature and check its method name.

        A signature that is not a regression gets INVALID_ARGUMENT with TF
        Serving's message; a genuine one UNIMPLEMENTED (this server does not
        run regressions).
        """
        kind, method = "regression", REGRESS_METHOD
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

    def calls_in_flight(self):
        """How many model calls were submitted and have not finished."""
        with self._in_flight_lock:
            return len(self._in_flight)

    def _track(self, future):
        with self._in_flight_lock:
            self._in_flight.add(future)

        def forget(done):
            with self._in_flight_lock:
                self._in_flight.discard(done)

        future.add_done_callback(forget)

    def shutdown(self):
        with self._schedulers_lock:
            schedulers = list(self._schedulers.values())
        for pool in [self.executor, self.decoder]:
            pool.shutdown(wait=False, cancel_futures=True)
        for scheduler in schedulers:
            scheduler.shutdown()
