"""The model server: REST and gRPC in one asyncio loop, TF Serving's flags.

Example:
    from keras_transformer.serving import server
    server.serve(model_name="zh_en", model_base_path="export/zh_en")  # blocks

    # Or in the background (tests, notebooks, benchmarks):
    with server.ServerThread(server.ServerOptions.from_model("zh_en", "export/zh_en",
                                                            port=0, rest_api_port=0)) as running:
        print(running.rest_url, running.grpc_target)

From the command line: `python -m keras_transformer.serving.server --model_name=zh_en
--model_base_path=export/zh_en` (the same flags as tensorflow_model_server).
"""

import asyncio
import logging
import signal
import socket
import threading

import grpc
from aiohttp import web

from keras_transformer.serving import batching
from keras_transformer.serving import command
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

# The server's public entry points, in one import.
ServerOptions = config_lib.ServerOptions
add_arguments = command.add_arguments
main = command.main
serve = command.serve


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
            self._make_batchers if options.batching else None, options.poll_seconds)
        self.core = inference.ServingCore(
            self.registry, options.limits, self.metrics, options.num_model_threads)
        self.grpc_port = None
        self.rest_port = None
        self._grpc_server = None
        self._rest_runner = None

    def _load_servable(self, path):
        servable = servable_lib.Servable(path)
        if self.options.enable_model_warmup:
            count = warmup.run_warmup(servable, tensors.tensor_from_proto)
            if count:
                _log.info("Finished reading warmup data for model at %s. Number of warmup "
                          "records read: %d.", path, count)
        return servable

    def _make_batchers(self, model_name, servable):
        return {
            name: batching.BatchScheduler(
                signature.run, self.options.batching, name=f"batch-{model_name}-{name}",
                on_batch=lambda size: self.metrics.record_batch(model_name, size))
            for name, signature in servable.signatures.items() if signature.batchable}

    async def start(self):
        """Loads the initial versions, then opens both ports."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.registry.start)
        options = self.options
        self._grpc_server = grpc.aio.server(
            options=grpc_service.grpc_server_options(options.limits.max_body_bytes))
        grpc_service.add_services(self._grpc_server, self.core, options.allow_config_reload)
        self.grpc_port = self._grpc_server.add_insecure_port(
            _grpc_address(options.host, options.port))
        if not self.grpc_port:
            raise OSError(f"Could not bind gRPC to {options.host}:{options.port}")
        await self._grpc_server.start()
        _log.info("Running gRPC ModelServer at %s ...", _grpc_address(options.host, self.grpc_port))
        if options.rest_api_port is not None:
            api = rest.RestApi(self.core, options.monitoring.prometheus_path, options.page_dir)
            self._rest_runner = web.AppRunner(
                api.make_app(), access_log=None, shutdown_timeout=options.shutdown_grace_s)
            await self._rest_runner.setup()
            host = options.rest_api_host or options.host
            sock = socket.create_server((host, options.rest_api_port),
                                        family=socket.AF_INET6 if ":" in host else socket.AF_INET)
            self.rest_port = sock.getsockname()[1]
            await web.SockSite(self._rest_runner, sock).start()
            _log.info("Exporting HTTP/REST API at:%s:%d ...", host, self.rest_port)

    async def stop(self):
        """Stops accepting, lets in-flight requests finish, unloads everything."""
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
    """Runs a `ModelServer` until SIGINT/SIGTERM, then stops it gracefully."""
    server = ModelServer(options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # Not the main thread / Windows.
            pass
    try:
        await server.start()
        await stop.wait()
    finally:
        _log.info("Shutting down")
        await server.stop()


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


if __name__ == "__main__":
    raise SystemExit(main())
