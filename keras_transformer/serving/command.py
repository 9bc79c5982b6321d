"""Command-line flags of the model server, named as tensorflow_model_server's.

Every flag of tensorflow_model_server 2.21 is accepted: those that mean
something here are implemented, the others (TLS, TPU, TFLite, ...) are accepted
with a one-line warning that they are ignored (`IGNORED_TF_SERVING_FLAGS`). A
flag neither server has is refused with one line.

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
import sys

from keras_transformer.serving import config as config_lib

_log = logging.getLogger(__name__)

# tensorflow_model_server flags that mean nothing for this server (no TLS, TPU,
# TFLite, XLA or profiler here): accepted so a deployment's command line runs
# unchanged, and named in a one-line warning when given.
IGNORED_TF_SERVING_FLAGS = (
    "grpc_socket_path", "rest_api_enable_cors_support", "enable_per_model_batching_parameters",
    "num_unload_threads", "flush_filesystem_caches", "tensorflow_session_config_file",
    "use_alts_credentials", "ssl_config_file", "platform_config_file",
    "per_process_gpu_memory_fraction", "saved_model_tags", "grpc_channel_arguments",
    "grpc_max_threads", "remove_unused_fields_from_bundle_metagraph", "prefer_tflite_model",
    "num_tflite_pools", "num_tflite_interpreters_per_pool",
    "xla_cpu_compilation_enabled", "xla_gpu_compilation_enabled", "enable_profiler",
    "thread_pool_factory_config_file", "mixed_precision", "skip_initialize_tpu",
    "enable_grpc_healthcheck_service", "enable_serialization_as_tensor_content",
)


def _boolean(text):
    """Parses true/false like TF Serving's flags (`--enable_batching=true`)."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _bool_flag(add, name, default, help_text):
    # Boolean flags take `--flag`, `--flag=true` or `--flag=false`, as in TF Serving.
    add(name, type=_boolean, nargs="?", const=True, default=default, metavar="BOOL",
        help=help_text)


def _one_line_errors(parser):
    """Makes the parser's errors one line (no usage block), naming the mistake."""
    def error(message):
        if message.startswith("unrecognized arguments:"):
            flags = message.split(":", 1)[1].strip()
            message = (f"unknown flag(s) {flags}: neither tensorflow_model_server nor this "
                       "server has them (see --help)")
        parser.exit(2, f"{parser.prog}: error: {message}\n")

    parser.error = error
    parser.allow_abbrev = False  # TF Serving accepts no abbreviated flag names.


def add_arguments(parser):
    """Adds tensorflow_model_server's flags (and this server's own limits).

    Args:
        parser: an `argparse.ArgumentParser` (or subparser).

    Returns:
        The parser.
    """
    limits = config_lib.ServingLimits()
    options = config_lib.ServerOptions(model_config=None)
    _one_line_errors(parser)
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
        help="Request deadline (REST and gRPC): a model call not started by then never "
             "starts, and the client gets 504 / DEADLINE_EXCEEDED.")
    add("--rest_api_num_threads", type=int, default=None,
        help="Threads that parse and encode requests (default: 4 per CPU, at most 16).")
    _bool_flag(add, "--enable_batching", False, "Merge concurrent requests into batches.")
    add("--batching_parameters_file", default=None, help="BatchingParameters text proto.")
    add("--model_config_file_poll_wait_seconds", type=float, default=0,
        help="Seconds between re-reads of --model_config_file (0: read once).")
    add("--file_system_poll_wait_seconds", type=float, default=1.0,
        help="Seconds between polls of the base paths for new versions; 0 polls once.")
    add("--max_num_load_retries", type=int, default=options.max_num_load_retries,
        help="Times a version that failed to load is tried again.")
    add("--load_retry_interval_micros", type=int,
        default=int(options.load_retry_interval_s * 1e6),
        help="Microseconds between those tries (default 60 s).")
    add("--num_load_threads", type=int, default=0,
        help="Models loaded in parallel (0: one at a time).")
    add("--tensorflow_session_parallelism", type=int, default=0,
        help="Both TensorFlow thread pools' size, unless set one by one below (0: auto).")
    add("--tensorflow_intra_op_parallelism", type=int, default=0,
        help="TensorFlow's intra-op threads (0: auto).")
    add("--tensorflow_inter_op_parallelism", type=int, default=0,
        help="TensorFlow's inter-op threads (0: auto).")
    add("--monitoring_config_file", default=None,
        help="MonitoringConfig text proto (Prometheus path); metrics are on by default at "
             f"{config_lib.DEFAULT_METRICS_PATH}.")
    _bool_flag(add, "--enable_model_warmup", True,
               "Replay assets.extra/tf_serving_warmup_requests on load.")
    add("--num_request_iterations_for_warmup", type=int, default=1,
        help="Times each warmup request is replayed.")
    _bool_flag(add, "--enable_signature_method_name_check", False,
               "Classify only signatures whose method name is tensorflow/serving/classify "
               "(by default, as in TF Serving, any signature of a classifier's shape).")
    _bool_flag(add, "--allow_version_labels_for_unavailable_models", True,
               "Accepted for compatibility; labels may always name any version.")
    add("--version", action="store_true", help="Print the version and exit.")
    # This server's own flags.
    _bool_flag(add, "--enable_model_config_reload", False,
               "Allow ModelService.HandleReloadConfigRequest.")
    add("--max_request_bytes", type=int, default=limits.max_body_bytes,
        help="Largest REST body or gRPC message accepted.")
    add("--max_instances_per_request", type=int, default=limits.max_instances,
        help="Most rows in one request.")
    add("--max_values_per_input", type=int, default=limits.max_elements,
        help="Most values in one input tensor of a request.")
    add("--max_request_tensor_bytes", type=int, default=limits.max_tensor_bytes,
        help="Most bytes of a request's decoded input tensors (a Classify context counts "
             "once per example).")
    add("--max_response_bytes", type=int, default=limits.max_response_bytes,
        help="Most bytes of output tensors one request may produce, before encoding.")
    add("--max_rows_per_model_call", type=int, default=limits.max_rows_per_call,
        help="Most rows of one slice of a model call.")
    add("--model_call_slice_in_ms", type=int, default=round(limits.slice_seconds * 1000),
        help="The time one slice of a model call should take: requests run in slices of as "
             "many rows as this allows at the signature's pace, the deadline checked before "
             "each, so work whose client left stops within about one slice.")
    add("--idle_timeout_seconds", type=float, default=limits.idle_timeout_s,
        help="Close a connection that completes no request for this long.")
    add("--shutdown_grace_seconds", type=float, default=options.shutdown_grace_s,
        help="On SIGTERM/SIGINT, how long in-flight requests may finish before the process "
             "exits anyway; a second signal exits at once.")
    add("--num_model_threads", type=int, default=None,
        help="Threads that run model calls' slices, per model; calls take turns slice by "
             "slice (default: the CPUs, at least 2).")
    _bool_flag(add, "--web_page", True,
               "Serve the page (translation, generation or classification) at / (on the "
               "REST port); --web_page=false turns it off.")
    add("--static_dir", default=None,
        help="Serve this folder's index.html and files at / instead of the packaged page.")
    ignored = parser.add_argument_group(
        "tensorflow_model_server flags accepted and ignored (with a warning)",
        " ".join(f"--{name}" for name in IGNORED_TF_SERVING_FLAGS))
    for name in IGNORED_TF_SERVING_FLAGS:
        ignored.add_argument(f"--{name}", nargs="?", const="", default=None, metavar="VALUE",
                             help=argparse.SUPPRESS)
    return parser


def ignored_flags(args):
    """The IGNORED_TF_SERVING_FLAGS the command line gave."""
    return [name for name in IGNORED_TF_SERVING_FLAGS if getattr(args, name, None) is not None]


def options_from_args(args):
    """Builds `ServerOptions` from parsed `add_arguments` flags.

    Raises:
        ConfigError: on inconsistent flags or unreadable config files.
    """
    for name in ignored_flags(args):
        _log.warning("--%s is a tensorflow_model_server flag this server ignores", name)
    for name in ("rest_api_timeout_in_ms", "max_request_bytes", "max_instances_per_request",
                 "max_values_per_input", "max_request_tensor_bytes", "max_response_bytes",
                 "max_rows_per_model_call", "model_call_slice_in_ms",
                 "num_request_iterations_for_warmup"):
        if getattr(args, name) < 1:
            raise config_lib.ConfigError(f"--{name} must be positive, got {getattr(args, name)}")
    for name in ("max_num_load_retries", "load_retry_interval_micros", "num_load_threads",
                 "tensorflow_session_parallelism", "tensorflow_intra_op_parallelism",
                 "tensorflow_inter_op_parallelism", "shutdown_grace_seconds",
                 "idle_timeout_seconds", "model_config_file_poll_wait_seconds"):
        if getattr(args, name) < 0:
            raise config_lib.ConfigError(
                f"--{name} must not be negative, got {getattr(args, name)}")
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
            max_elements=args.max_values_per_input,
            max_tensor_bytes=args.max_request_tensor_bytes,
            max_response_bytes=args.max_response_bytes,
            max_rows_per_call=args.max_rows_per_model_call,
            slice_seconds=args.model_call_slice_in_ms / 1000,
            request_timeout_s=args.rest_api_timeout_in_ms / 1000,
            idle_timeout_s=args.idle_timeout_seconds),
        enable_model_warmup=args.enable_model_warmup,
        warmup_iterations=args.num_request_iterations_for_warmup,
        allow_config_reload=args.enable_model_config_reload,
        signature_method_name_check=args.enable_signature_method_name_check,
        num_model_threads=args.num_model_threads,
        web_page=args.web_page,
        static_dir=args.static_dir,
        shutdown_grace_s=args.shutdown_grace_seconds,
        max_num_load_retries=args.max_num_load_retries,
        load_retry_interval_s=args.load_retry_interval_micros / 1e6,
        num_load_threads=args.num_load_threads,
        num_request_threads=args.rest_api_num_threads,
        intra_op_threads=(args.tensorflow_intra_op_parallelism
                          or args.tensorflow_session_parallelism),
        inter_op_threads=(args.tensorflow_inter_op_parallelism
                          or args.tensorflow_session_parallelism),
        model_config_file=args.model_config_file,
        model_config_poll_seconds=(args.model_config_file_poll_wait_seconds
                                   if args.model_config_file else 0))


def serve(model_name="default", model_base_path=None, model_config_file=None, port=8500,
          rest_api_port=8501, host="127.0.0.1", enable_batching=False,
          batching_parameters_file=None, file_system_poll_wait_seconds=1.0,
          monitoring_config_file=None, static_dir=None, **flags):
    """Runs the server until SIGINT/SIGTERM, then drains it for the grace period.

    If model calls are still running when the grace period ends, the process
    exits (`os._exit(1)`): those calls run on threads Python cannot stop.

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
        prog="python -m keras_transformer.serving",
        description="Serve SavedModels over TF Serving's REST and gRPC APIs."))
    args = parser.parse_args(argv)
    if args.version:
        return run(args)
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
    if args.version:
        from importlib import metadata

        try:
            version = metadata.version("keras-transformer")
        except metadata.PackageNotFoundError:
            version = "unknown"
        print(f"keras-transformer model server {version} (tensorflow_model_server compatible)")
        return 0
    return _run_options(options_from_args(args))


def _run_options(options):
    # Imported here so that building the CLI parser stays cheap.
    from keras_transformer.serving import server

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not asyncio.run(server.serve_until_signal(options)):
        # Model calls still run on threads Python cannot stop, and the
        # interpreter would wait for them at exit: leave now.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    return 0
