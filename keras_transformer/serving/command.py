"""Command-line flags of the model server, named as tensorflow_model_server's.

Kept apart from `server` so a CLI can build its parser without importing
TensorFlow or the RPC libraries; the server itself is imported on `run`.

Example:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    run(parser.parse_args(["--model_name=zh_en", "--model_base_path=export/zh_en"]))
"""

import argparse
import asyncio
import logging
import os

from keras_transformer.serving import config as config_lib


def _boolean(text):
    """Parses true/false like TF Serving's flags (`--enable_batching=true`)."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_arguments(parser):
    """Adds tensorflow_model_server's flag names (and this server's limits).

    Args:
        parser: an `argparse.ArgumentParser` (or subparser).

    Returns:
        The parser.
    """
    limits = config_lib.ServingLimits()
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
    # Boolean flags take `--flag`, `--flag=true` or `--flag=false`, as in TF Serving.
    add("--enable_batching", type=_boolean, nargs="?", const=True, default=False,
        metavar="BOOL", help="Merge concurrent requests into batches.")
    add("--batching_parameters_file", default=None, help="BatchingParameters text proto.")
    add("--file_system_poll_wait_seconds", type=float, default=1.0,
        help="Seconds between polls of the base paths for new versions; 0 polls once.")
    add("--monitoring_config_file", default=None,
        help="MonitoringConfig text proto (Prometheus path); metrics are on by default at "
             f"{config_lib.DEFAULT_METRICS_PATH}.")
    add("--enable_model_warmup", type=_boolean, nargs="?", const=True, default=True,
        metavar="BOOL", help="Replay assets.extra/tf_serving_warmup_requests on load.")
    add("--allow_version_labels_for_unavailable_models", type=_boolean, nargs="?", const=True,
        default=True, metavar="BOOL",
        help="Accepted for compatibility; labels may always name any version.")
    add("--enable_model_config_reload", type=_boolean, nargs="?", const=True, default=False,
        metavar="BOOL", help="Allow ModelService.HandleReloadConfigRequest.")
    add("--max_request_bytes", type=int, default=limits.max_body_bytes,
        help="Largest REST body or gRPC message accepted.")
    add("--max_instances_per_request", type=int, default=limits.max_instances,
        help="Most rows in one request.")
    add("--num_model_threads", type=int, default=None, help="Threads for model calls.")
    add("--web_page", type=_boolean, nargs="?", const=True, default=True, metavar="BOOL",
        help="Serve the translation page at / (on the REST port); --web_page=false turns it off.")
    add("--static_dir", default=None,
        help="Serve this folder's index.html and files at / instead of the packaged page.")
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
    if args.static_dir and not args.web_page:
        raise config_lib.ConfigError("--static_dir needs --web_page")
    monitoring = (config_lib.read_monitoring_config_file(args.monitoring_config_file)
                  if args.monitoring_config_file else config_lib.MonitoringOptions())
    return config_lib.ServerOptions(
        model_config=model_config,
        host=args.host,
        port=args.port,
        rest_api_port=args.rest_api_port or None,
        rest_api_host=args.rest_api_host,
        batching=batching_options,
        poll_seconds=args.file_system_poll_wait_seconds,
        monitoring=monitoring,
        limits=config_lib.ServingLimits(
            max_body_bytes=args.max_request_bytes,
            max_instances=args.max_instances_per_request,
            request_timeout_s=args.rest_api_timeout_in_ms / 1000),
        enable_model_warmup=args.enable_model_warmup,
        allow_config_reload=args.enable_model_config_reload,
        num_model_threads=args.num_model_threads,
        web_page=args.web_page,
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
    run(args)


def main(argv=None):
    """Command-line entry point; returns the exit status."""
    parser = add_arguments(argparse.ArgumentParser(
        prog="keras-transformer serve",
        description="Serve SavedModels over TF Serving's REST and gRPC APIs."))
    args = parser.parse_args(argv)
    try:
        options = options_from_args(args)
    except (config_lib.ConfigError, OSError) as error:
        parser.error(str(error))
    return _run_options(options)


def run(args):
    """`keras-transformer serve`: serves until SIGINT/SIGTERM; returns 0.

    Raises:
        ConfigError (a ValueError): on bad flags or config files.
    """
    return _run_options(options_from_args(args))


def _run_options(options):
    # Imported here so that building the CLI parser stays cheap.
    from keras_transformer.serving import server

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(server.serve_until_signal(options))
    return 0
