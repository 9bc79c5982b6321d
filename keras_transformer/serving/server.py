"""The model server: REST and gRPC in one asyncio loop, TF Serving's flags.

Example:
    from keras_transformer.serving import command, server
    command.serve(model_name="zh_en", model_base_path="export/zh_en")  # blocks

    # Or in the background (tests, notebooks, benchmarks):
    with server.ServerThread(server.ServerOptions.from_model("zh_en", "export/zh_en",
                                                            port=0, rest_api_port=0)) as running:
        print(running.rest_url, running.grpc_target)

Flags live in `command` (the server knows nothing about them); from the command
line: `python -m keras_transformer.serving --model_name=zh_en
--model_base_path=export/zh_en` (the same flags as tensorflow_model_server).
"""

import asyncio
import logging
import os
import signal
import socket
import threading
import time

import grpc
from aiohttp import web

from keras_transformer.serving import batching
from keras_transformer.serving import budgets
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import grpc_service
from keras_transformer.serving import inference
from keras_transformer.serving import manager
from keras_transformer.serving import metrics as metrics_lib
from keras_transformer.serving import rest
from keras_transformer.serving import servable as servable_lib
from keras_transformer.serving import tensors
from keras_transformer.serving import warmup

_log = logging.getLogger(__name__)

ServerOptions = config_lib.ServerOptions


def _models_of(model_server_config):
    """{name: serialized ModelConfig}: compares configs whatever their model order."""
    return {model.name: model.SerializeToString(deterministic=True)
            for model in model_server_config.model_config_list.config}


def _grpc_address(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ModelServer:
    """REST + gRPC over the versions of the configured models.

    Args:
        options: `ServerOptions`.

    Attributes (after `start`):
        grpc_port: the bound gRPC port.
        rest_port: the bound REST port, or None.
    """

    def __init__(self, options):
        self.options = options
        self.metrics = metrics_lib.ServingMetrics()
        self.registry = manager.ModelRegistry(
            options.model_config, self._load_servable,
            self._make_batchers if options.batching else None, options.poll_seconds,
            retry=manager.LoadRetryPolicy(options.max_num_load_retries,
                                          options.load_retry_interval_s),
            num_load_threads=options.num_load_threads)
        self.core = inference.ServingCore(
            self.registry, options.limits, self.metrics, options.num_model_threads,
            options.num_request_threads, options.signature_method_name_check)
        self.grpc_port = None
        self.rest_port = None
        self._grpc_server = None
        self._rest_runner = None
        self._config_poller = None

    def _load_servable(self, path):
        servable = servable_lib.Servable(path)
        if self.options.enable_model_warmup:
            count = warmup.run_warmup(servable, tensors.tensor_from_proto,
                                      self.options.warmup_iterations,
                                      self.options.signature_method_name_check)
            if count:
                _log.info("Finished reading warmup data for model at %s. Number of warmup "
                          "records read: %d.", path, count)
        return servable

    def _make_batchers(self, model_name, servable):
        limits = self.options.limits

        def sliced(signature):
            # A merged batch takes its turns on the model's threads with the
            # model's other calls; the batch thread waits for it.
            return lambda inputs, should_stop: self.core.model_scheduler(model_name).submit(
                budgets.sliced_call(signature, inputs, limits.max_rows_per_call,
                                    should_stop=should_stop,
                                    slice_seconds=limits.slice_seconds)).result()

        return {
            name: batching.BatchScheduler(
                sliced(signature), self.options.batching, name=f"batch-{model_name}-{name}",
                on_batch=lambda size: self.metrics.record_batch(model_name, size))
            for name, signature in servable.signatures.items() if signature.batchable}

    def _set_tensorflow_threads(self):
        import tensorflow as tf

        threading_config = tf.config.threading
        for count, setter, getter in (
                (self.options.intra_op_threads, threading_config.set_intra_op_parallelism_threads,
                 threading_config.get_intra_op_parallelism_threads),
                (self.options.inter_op_threads, threading_config.set_inter_op_parallelism_threads,
                 threading_config.get_inter_op_parallelism_threads)):
            if count and getter() != count:
                try:
                    setter(count)
                except RuntimeError as error:  # TensorFlow already started (tests, notebooks).
                    _log.warning("TensorFlow thread counts cannot change now: %s", error)

    async def _poll_model_config_file(self):
        """Re-reads --model_config_file, as TF Serving's
        --model_config_file_poll_wait_seconds does, and applies changes."""
        path, period = self.options.model_config_file, self.options.model_config_poll_seconds
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(period)
            try:
                config = await loop.run_in_executor(
                    None, config_lib.read_model_config_file, path)
                if _models_of(config) != _models_of(self.registry.model_server_config):
                    _log.info("Model config file %s changed; applying it", path)
                    await loop.run_in_executor(None, self.registry.reload_config, config)
            except (config_lib.ConfigError, OSError) as error:
                _log.error("Keeping the current models: cannot use %s: %s", path, error)

    async def start(self):
        """Loads the initial versions, then opens both ports."""
        loop = asyncio.get_running_loop()
        self._set_tensorflow_threads()
        await loop.run_in_executor(None, self.registry.start)
        options = self.options
        if options.model_config_file and options.model_config_poll_seconds > 0:
            self._config_poller = asyncio.ensure_future(self._poll_model_config_file())
        self._grpc_server = grpc.aio.server(
            options=grpc_service.grpc_server_options(options.limits.max_body_bytes,
                                                     options.limits.idle_timeout_s))
        grpc_service.add_services(self._grpc_server, self.core, options.allow_config_reload)
        self.grpc_port = self._grpc_server.add_insecure_port(
            _grpc_address(options.host, options.port))
        if not self.grpc_port:
            raise OSError(f"Could not bind gRPC to {options.host}:{options.port}")
        await self._grpc_server.start()
        _log.info("Running gRPC ModelServer at %s ...", _grpc_address(options.host, self.grpc_port))
        if options.rest_api_port is not None:
            api = rest.RestApi(self.core, options.monitoring.prometheus_path, options.page_dir)
            self._rest_runner = web.ServerRunner(api.make_server(),
                                                 shutdown_timeout=options.shutdown_grace_s)
            await self._rest_runner.setup()
            host = options.rest_api_host or options.host
            sock = socket.create_server((host, options.rest_api_port),
                                        family=socket.AF_INET6 if ":" in host else socket.AF_INET)
            self.rest_port = sock.getsockname()[1]
            await web.SockSite(self._rest_runner, sock).start()
            _log.info("Exporting HTTP/REST API at:%s:%d ...", host, self.rest_port)

    async def stop(self):
        """Stops accepting, lets in-flight requests finish, unloads everything."""
        if self._config_poller is not None:
            self._config_poller.cancel()
            self._config_poller = None
        closing = []
        if self._rest_runner is not None:
            closing.append(self._rest_runner.cleanup())  # Waits up to shutdown_timeout.
            self._rest_runner = None
        if self._grpc_server is not None:
            closing.append(self._grpc_server.stop(self.options.shutdown_grace_s))
            self._grpc_server = None
        await asyncio.gather(*closing)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.registry.stop)
        self.core.shutdown()


async def serve_until_signal(options):
    """Runs a `ModelServer` until SIGINT/SIGTERM, then drains it.

    The first signal stops accepting requests and lets those in flight finish
    for up to `options.shutdown_grace_s` seconds; a second signal ends the
    process at once.

    Returns:
        True when everything finished in time; False when model calls were
        still running at the end of the grace period (they run on threads that
        cannot be stopped, so the caller must end the process with `os._exit`).
    """
    server = ModelServer(options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def second_signal():
        _log.warning("Second signal: exiting now")
        logging.shutdown()
        os._exit(1)

    def first_signal():
        _log.info("Signal received: draining for up to %g s (signal again to exit now)",
                  options.shutdown_grace_s)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, second_signal)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, first_signal)
        except (NotImplementedError, RuntimeError):  # Not the main thread / Windows.
            pass
    try:
        await server.start()
        await stop.wait()
    finally:
        _log.info("Shutting down")
        give_up_at = time.monotonic() + options.shutdown_grace_s
        try:
            await asyncio.wait_for(server.stop(), options.shutdown_grace_s)
        except asyncio.TimeoutError:
            pass
        while server.core.calls_in_flight() and time.monotonic() < give_up_at:
            await asyncio.sleep(0.05)
    left = server.core.calls_in_flight()
    if left:
        _log.warning("Exiting with %d model call(s) still running after the %g s grace period",
                     left, options.shutdown_grace_s)
    return not left


class ServerThread:
    """Runs a `ModelServer` on its own event loop in a background thread.

    Use as a context manager; `rest_url` and `grpc_target` are set once it is
    ready.
    """

    def __init__(self, options, start_timeout_s=120.0):
        self.server = ModelServer(options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="model-server",
                                        daemon=True)
        self._start_timeout_s = start_timeout_s

    @property
    def rest_url(self):
        host = self.server.options.rest_api_host or self.server.options.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.server.rest_port}"

    @property
    def grpc_target(self):
        return _grpc_address(self.server.options.host, self.server.grpc_port)

    def start(self):
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(
                self._start_timeout_s)
        except BaseException:
            self.stop()  # Closes whatever did start (a port, the poller).
            raise
        return self

    def stop(self):
        if not self._thread.is_alive():
            return
        try:
            asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(60)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

