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

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import socket
import threading

import grpc
from aiohttp import web

from keras_transformer.serving import batching
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


@dataclasses.dataclass
class ServerOptions:
    """Everything a `ModelServer` needs.

    Attributes:
        model_config: a validated `ModelServerConfig` proto.
        host: address both APIs bind; loopback unless told otherwise.
        port: gRPC port (0: any free port).
        rest_api_port: REST port (0: any free port; None: no REST API).
        rest_api_host: REST address when it differs from `host`.
        batching: `config.BatchingOptions`, or None for no batching.
        poll_seconds: file system poll period (<= 0: poll once at start).
        monitoring: `config.MonitoringOptions` (where metrics are served).
        limits: `inference.ServingLimits`.
        enable_model_warmup: run assets.extra warmup requests on load.
        allow_config_reload: accept ModelService.HandleReloadConfigRequest.
        num_model_threads: threads for unbatched model calls.
        static_dir: folder whose index.html is served at "/" (web page hook).
        shutdown_grace_s: how long in-flight requests may run at shutdown.
    """

    model_config: object
    host: str = "127.0.0.1"
    port: int = 8500
    rest_api_port: int | None = 8501
    rest_api_host: str | None = None
    batching: config_lib.BatchingOptions | None = None
    poll_seconds: float = 1.0
    monitoring: config_lib.MonitoringOptions = dataclasses.field(
        default_factory=config_lib.MonitoringOptions)
    limits: inference.ServingLimits = dataclasses.field(default_factory=inference.ServingLimits)
    enable_model_warmup: bool = True
    allow_config_reload: bool = False
    num_model_threads: int | None = None
    static_dir: str | None = None
    shutdown_grace_s: float = 5.0

    @classmethod
    def from_model(cls, model_name, model_base_path, **kwargs):
        """Options for one model, as `--model_name --model_base_path` give."""
        return cls(model_config=config_lib.single_model_config(
            model_name, os.path.abspath(model_base_path)), **kwargs)


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
            api = rest.RestApi(self.core, options.monitoring.prometheus_path, options.static_dir)
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
        grace = self.options.shutdown_grace_s
        if self._rest_runner is not None:
            await self._rest_runner.cleanup()
            self._rest_runner = None
        if self._grpc_server is not None:
            await self._grpc_server.stop(grace)
            self._grpc_server = None
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.registry.stop)
        self.core.shutdown()


async def _serve_until_signal(options):
    server = ModelServer(options)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # Not the main thread / Windows.
            pass
    try:
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
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(
            self._start_timeout_s)
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


# ----------------------------------------------------------------------- flags


def add_arguments(parser):
    """Adds tensorflow_model_server's flag names (and this server's limits).

    Args:
        parser: an `argparse.ArgumentParser` (or subparser).

    Returns:
        The parser.
    """
    limits = inference.ServingLimits()
    add = parser.add_argument
    add("--model_name", default="default", help="Model name (ignored with --model_config_file).")
    add("--model_base_path", default=None, help="Folder of integer version folders.")
    add("--model_config_file", default=None, help="model_config_list text proto.")
    add("--port", type=int, default=8500, help="gRPC port.")
    add("--rest_api_port", type=int, default=8501, help="REST port; 0 disables REST.")
    add("--host", default="127.0.0.1",
        help="Address to bind (gRPC and REST); 0.0.0.0 exposes the server to the network.")
    add("--rest_api_host", default=None, help="REST address, when it differs from --host.")
    add("--rest_api_timeout_in_ms", type=int, default=int(limits.request_timeout_s * 1000),
        help="Model call deadline; past it a request answers 504 / DEADLINE_EXCEEDED.")
    add("--enable_batching", action=argparse.BooleanOptionalAction, default=False)
    add("--batching_parameters_file", default=None, help="BatchingParameters text proto.")
    add("--file_system_poll_wait_seconds", type=float, default=1.0,
        help="Seconds between polls of the base paths for new versions; 0 polls once.")
    add("--monitoring_config_file", default=None,
        help="MonitoringConfig text proto (Prometheus path); metrics are on by default at "
             f"{config_lib.DEFAULT_METRICS_PATH}.")
    add("--enable_model_warmup", action=argparse.BooleanOptionalAction, default=True)
    add("--allow_version_labels_for_unavailable_models", action=argparse.BooleanOptionalAction,
        default=True, help="Accepted for compatibility; labels may always name any version.")
    add("--enable_model_config_reload", action=argparse.BooleanOptionalAction, default=False,
        help="Allow ModelService.HandleReloadConfigRequest.")
    add("--max_request_bytes", type=int, default=limits.max_body_bytes,
        help="Largest REST body or gRPC message accepted.")
    add("--max_instances_per_request", type=int, default=limits.max_instances,
        help="Most rows in one request.")
    add("--num_model_threads", type=int, default=None, help="Threads for model calls.")
    add("--static_dir", default=None, help="Serve index.html from this folder at /.")
    return parser


def options_from_args(args):
    """Builds `ServerOptions` from parsed `add_arguments` flags.

    Raises:
        ConfigError: on inconsistent flags or unreadable config files.
    """
    if args.model_config_file:
        model_config = config_lib.read_model_config_file(args.model_config_file)
    elif args.model_base_path:
        config_lib.check_model_name(args.model_name)
        model_config = config_lib.single_model_config(
            args.model_name, os.path.abspath(args.model_base_path))
    else:
        raise config_lib.ConfigError("Give --model_base_path or --model_config_file")
    batching_options = None
    if args.enable_batching:
        batching_options = (config_lib.read_batching_parameters_file(args.batching_parameters_file)
                            if args.batching_parameters_file else config_lib.BatchingOptions())
    elif args.batching_parameters_file:
        raise config_lib.ConfigError("--batching_parameters_file needs --enable_batching")
    monitoring = (config_lib.read_monitoring_config_file(args.monitoring_config_file)
                  if args.monitoring_config_file else config_lib.MonitoringOptions())
    return ServerOptions(
        model_config=model_config,
        host=args.host,
        port=args.port,
        rest_api_port=args.rest_api_port or None,
        rest_api_host=args.rest_api_host,
        batching=batching_options,
        poll_seconds=args.file_system_poll_wait_seconds,
        monitoring=monitoring,
        limits=inference.ServingLimits(
            max_body_bytes=args.max_request_bytes,
            max_instances=args.max_instances_per_request,
            request_timeout_s=args.rest_api_timeout_in_ms / 1000),
        enable_model_warmup=args.enable_model_warmup,
        allow_config_reload=args.enable_model_config_reload,
        num_model_threads=args.num_model_threads,
        static_dir=args.static_dir)


def serve(model_name="default", model_base_path=None, model_config_file=None, port=8500,
          rest_api_port=8501, host="127.0.0.1", enable_batching=False,
          batching_parameters_file=None, file_system_poll_wait_seconds=1.0,
          monitoring_config_file=None, static_dir=None, **flags):
    """Runs the server until SIGINT/SIGTERM, then shuts down gracefully.

    Arguments mirror the flags of `add_arguments` (and tensorflow_model_server);
    extra flags (`rest_api_host`, `max_request_bytes`, ...) go in `**flags`.
    """
    parser = add_arguments(argparse.ArgumentParser())
    args = parser.parse_args([])
    values = dict(model_name=model_name, model_base_path=model_base_path,
                  model_config_file=model_config_file, port=port, rest_api_port=rest_api_port,
                  host=host, enable_batching=enable_batching,
                  batching_parameters_file=batching_parameters_file,
                  file_system_poll_wait_seconds=file_system_poll_wait_seconds,
                  monitoring_config_file=monitoring_config_file, static_dir=static_dir, **flags)
    for name, value in values.items():
        if not hasattr(args, name):
            raise TypeError(f"serve() got an unexpected argument {name!r}")
        setattr(args, name, value)
    asyncio.run(_serve_until_signal(options_from_args(args)))


def main(argv=None):
    """Command-line entry point; returns the exit status."""
    parser = add_arguments(argparse.ArgumentParser(
        prog="keras-transformer serve",
        description="Serve SavedModels over TF Serving's REST and gRPC APIs."))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        options = options_from_args(args)
    except (config_lib.ConfigError, OSError) as error:
        parser.error(str(error))
    asyncio.run(_serve_until_signal(options))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
