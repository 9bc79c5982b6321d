"""Server configuration: TF Serving's config files, request limits, options.

TF Serving's model config, batching parameters and monitoring config are text
protos. The model config uses TF Serving's own
`ModelServerConfig` message. The batching and monitoring messages are not
shipped in the `tensorflow-serving-api` wheel, so when their generated modules
are missing we declare the same messages (same field names and numbers as
`session_bundle_config.proto` and `monitoring_config.proto`) in a private
descriptor pool and parse with `text_format`, which gives the exact syntax and
errors TF Serving's parser would.

`ServingLimits` and `ServerOptions` gather everything else a server is started
with. This module stays light (protobuf only, no TensorFlow) so the CLI can
build its parser cheaply.
"""

import dataclasses
import os

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message_factory
from google.protobuf import text_format
from google.protobuf import wrappers_pb2
from tensorflow_serving.config import model_server_config_pb2

from keras_transformer import versions as versions_lib

DEFAULT_METRICS_PATH = "/monitoring/prometheus/metrics"
# The model page (translate, generate, classify) shipped with the package
# (index.html, app.js, style.css).
WEB_PAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")


class ConfigError(ValueError):
    """A configuration file or flag that the server cannot use."""


def check_model_name(name):
    """Raises ConfigError unless `name` follows `versions.MODEL_NAME_RULE`."""
    if not versions_lib.is_model_name(name):
        raise ConfigError(f"Model name {name!r} is not a plain identifier "
                          f"({versions_lib.MODEL_NAME_RULE})")
    return name


# ----------------------------------------------------------------- model config


def single_model_config(model_name, model_base_path):
    """The config TF Serving builds from --model_name and --model_base_path.

    Args:
        model_name: the name clients use in URLs and ModelSpecs.
        model_base_path: folder holding the integer version folders.

    Returns:
        A `ModelServerConfig` with one model and the default policy, the latest
        version only.
    """
    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add()
    model.name = model_name
    model.base_path = model_base_path
    model.model_platform = "tensorflow"
    model.model_version_policy.latest.num_versions = 1
    return validate_model_config(config)


def parse_model_config(text):
    """Parses and validates a model config text proto.

    Args:
        text: `model_config_list { config { name: ... base_path: ... } }`.

    Returns:
        A validated `ModelServerConfig`.

    Raises:
        ConfigError: on a syntax error or an unusable value.
    """
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as error:
        raise ConfigError(f"Invalid model config: {error}") from error
    return validate_model_config(config)


def read_model_config_file(path):
    """Reads a `--model_config_file`; see `parse_model_config`."""
    with open(path, encoding="utf-8") as file:
        return parse_model_config(file.read())


def validate_model_config(config):
    """Checks what TF Serving checks before loading anything.

    Returns:
        `config`, unchanged.

    Raises:
        ConfigError: on a custom config, a bad or duplicate name, a missing base
            path, a platform other than TensorFlow, or a bad version policy.
    """
    if config.WhichOneof("config") != "model_config_list":
        raise ConfigError("Only model_config_list is supported")
    seen = set()
    for model in config.model_config_list.config:
        check_model_name(model.name)
        if model.name in seen:
            raise ConfigError(f"Illegal to list model {model.name} multiple times in config list")
        seen.add(model.name)
        if not model.base_path:
            raise ConfigError(f"Model {model.name} has no base_path")
        if model.model_platform not in ("", "tensorflow"):
            raise ConfigError(
                f"Model {model.name}: platform {model.model_platform!r} is not supported; "
                "only 'tensorflow'")
        for label in model.version_labels:
            if not versions_lib.is_model_name(label):
                raise ConfigError(f"Model {model.name}: bad version label {label!r}")
    return config


def version_policy(model_config):
    """Returns ("latest", n) | ("all", None) | ("specific", frozenset)."""
    policy = model_config.model_version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return "all", None
    if choice == "specific":
        return "specific", frozenset(policy.specific.versions)
    # TF Serving's default policy, also for latest {} (num_versions 0 means 1).
    return "latest", max(1, policy.latest.num_versions) if choice else 1


# --------------------------------------------- batching and monitoring messages


def _build_message_classes():
    """Declares BatchingParameters and MonitoringConfig in a private pool."""
    try:  # Use TF Serving's generated modules when the wheel ships them.
        from tensorflow_serving.servables.tensorflow import session_bundle_config_pb2
        from tensorflow_serving.config import monitoring_config_pb2
        return session_bundle_config_pb2.BatchingParameters, monitoring_config_pb2.MonitoringConfig
    except ImportError:
        pass
    field = descriptor_pb2.FieldDescriptorProto
    file_proto = descriptor_pb2.FileDescriptorProto(
        name="keras_transformer/serving/tf_serving_config.proto",
        package="tensorflow.serving", syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"])

    def add_fields(message, fields):
        for number, (name, kind) in enumerate(fields, start=1):
            if kind is None:
                continue  # A number TF Serving uses for a field we do not read.
            if kind.startswith("."):
                message.field.add(name=name, number=number, type=field.TYPE_MESSAGE,
                                  type_name=kind, label=field.LABEL_OPTIONAL)
            elif kind == "repeated int64":
                message.field.add(name=name, number=number, type=field.TYPE_INT64,
                                  label=field.LABEL_REPEATED)
            else:
                message.field.add(name=name, number=number, label=field.LABEL_OPTIONAL,
                                  type={"bool": field.TYPE_BOOL, "string": field.TYPE_STRING}[kind])

    int64 = ".google.protobuf.Int64Value"
    add_fields(file_proto.message_type.add(name="BatchingParameters"), [
        ("max_batch_size", int64),
        ("batch_timeout_micros", int64),
        ("max_enqueued_batches", int64),
        ("num_batch_threads", int64),
        ("thread_pool_name", ".google.protobuf.StringValue"),
        ("allowed_batch_sizes", "repeated int64"),
        ("pad_variable_length_inputs", "bool"),
        ("enable_large_batch_splitting", ".google.protobuf.BoolValue"),
        ("max_execution_batch_size", int64),
    ])
    add_fields(file_proto.message_type.add(name="PrometheusConfig"),
               [("enable", "bool"), ("path", "string")])
    add_fields(file_proto.message_type.add(name="MonitoringConfig"),
               [("prometheus_config", ".tensorflow.serving.PrometheusConfig")])
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(file_proto.SerializeToString())
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.serving.{n}"))
            for n in ("BatchingParameters", "MonitoringConfig"))


BatchingParametersProto, MonitoringConfigProto = _build_message_classes()


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """Dynamic batching settings, with TF Serving's defaults.

    Attributes:
        max_batch_size: most rows merged into one model call.
        batch_timeout_micros: how long the first request of a batch waits for
            others before the batch runs anyway.
        num_batch_threads: a signature's batches in flight at once (their
            slices run on the model's threads, `scheduling.SliceScheduler`).
        max_enqueued_batches: queue capacity, in batches; a request beyond it
            is refused with UNAVAILABLE.
        allowed_batch_sizes: when set, a batch is padded up to the next size in
            this increasing list, whose last entry is `max_batch_size`.
        pad_variable_length_inputs: pad inputs whose non-batch dimensions differ
            so requests of different lengths can share a batch.
    """

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    num_batch_threads: int = max(1, os.cpu_count() or 1)
    max_enqueued_batches: int = 10
    allowed_batch_sizes: tuple = ()
    pad_variable_length_inputs: bool = False

    def __post_init__(self):
        if self.max_batch_size < 1:
            raise ConfigError("max_batch_size must be positive")
        if self.batch_timeout_micros < 0:
            raise ConfigError("batch_timeout_micros must be non-negative")
        if self.num_batch_threads < 1:
            raise ConfigError("num_batch_threads must be positive")
        if self.max_enqueued_batches < 1:
            raise ConfigError("max_enqueued_batches must be positive")
        sizes = list(self.allowed_batch_sizes)
        if sizes:
            if any(b <= a for a, b in zip(sizes, sizes[1:])) or sizes[0] < 1:
                raise ConfigError("allowed_batch_sizes entries must be monotonically increasing")
            if sizes[-1] != self.max_batch_size:
                raise ConfigError("Last entry in allowed_batch_sizes must match max_batch_size")


def parse_batching_parameters(text):
    """Parses a `--batching_parameters_file` text proto into BatchingOptions.

    Fields this server does not implement (thread_pool_name, large-batch
    splitting) are accepted and ignored, as are fields newer than this parser.

    Raises:
        ConfigError: on a syntax error or an invalid value.
    """
    proto = BatchingParametersProto()
    try:
        text_format.Parse(text, proto, allow_unknown_field=True)
    except text_format.ParseError as error:
        raise ConfigError(f"Invalid batching parameters: {error}") from error
    values = {}
    for name in ("max_batch_size", "batch_timeout_micros", "num_batch_threads",
                 "max_enqueued_batches"):
        if proto.HasField(name):
            values[name] = getattr(proto, name).value
    values["allowed_batch_sizes"] = tuple(proto.allowed_batch_sizes)
    values["pad_variable_length_inputs"] = proto.pad_variable_length_inputs
    return BatchingOptions(**values)


def read_batching_parameters_file(path):
    with open(path, encoding="utf-8") as file:
        return parse_batching_parameters(file.read())


@dataclasses.dataclass(frozen=True)
class MonitoringOptions:
    """Where Prometheus metrics are served on the REST port (None: nowhere)."""

    prometheus_path: str | None = DEFAULT_METRICS_PATH


def parse_monitoring_config(text):
    """Parses `prometheus_config { enable: true path: "..." }`.

    Raises:
        ConfigError: on a syntax error or a path that does not start with "/".
    """
    proto = MonitoringConfigProto()
    try:
        text_format.Parse(text, proto, allow_unknown_field=True)
    except text_format.ParseError as error:
        raise ConfigError(f"Invalid monitoring config: {error}") from error
    prometheus = proto.prometheus_config
    if not prometheus.enable:
        return MonitoringOptions(prometheus_path=None)
    path = prometheus.path or DEFAULT_METRICS_PATH
    if not path.startswith("/") or path.startswith("/v1/"):
        raise ConfigError(f"Prometheus path {path!r} must start with '/' and not with '/v1/'")
    return MonitoringOptions(prometheus_path=path)


def read_monitoring_config_file(path):
    with open(path, encoding="utf-8") as file:
        return parse_monitoring_config(file.read())


@dataclasses.dataclass(frozen=True)
class ServingLimits:
    """Per-request limits that keep one client from starving the others.

    Attributes:
        max_body_bytes: largest REST body / gRPC message accepted.
        max_instances: most rows (size of axis 0) of any input in one request.
        max_elements: most values in any one input tensor of a request.
        max_tensor_bytes: most bytes of a request's decoded input tensors
            (numbers at their width, strings at their length; a Classify
            context counts once per example, as it is copied into each).
        max_response_bytes: most bytes of the output tensors one request may
            produce (counted as `max_tensor_bytes`), before any is encoded.
        max_rows_per_call: most rows of one slice of a model call.
        slice_seconds: the time one slice of a model call should take: its
            rows come from the pace (rows and input bytes a second) of the
            previous slice (at least one row, at most `max_rows_per_call`),
            and the deadline is checked before each, so abandoned work stops
            within about one slice.
        request_timeout_s: a request's deadline, counted from its arrival: a
            model call not started by then never starts, one running stops at
            its next slice, and a client still waiting then gets
            DEADLINE_EXCEEDED (HTTP 504). Encoding the response counts too.
        idle_timeout_s: a connection that completes no request for this long
            is closed.
    """

    max_body_bytes: int = 4 * 1024 * 1024
    max_instances: int = 1000
    max_elements: int = 1 << 24
    max_tensor_bytes: int = 64 * 1024 * 1024
    max_response_bytes: int = 16 * 1024 * 1024
    max_rows_per_call: int = 8
    slice_seconds: float = 1.0
    request_timeout_s: float = 30.0
    idle_timeout_s: float = 60.0


@dataclasses.dataclass
class ServerOptions:
    """Everything a `ModelServer` needs.

    Attributes:
        model_config: a validated `ModelServerConfig` proto.
        host: address both APIs bind; loopback unless told otherwise.
        port: gRPC port (0: any free port).
        rest_api_port: REST port (0: any free port; None: no REST API).
        rest_api_host: REST address when it differs from `host`.
        batching: `BatchingOptions`, or None for no batching.
        poll_seconds: file system poll period (<= 0: poll once at start).
        monitoring: `MonitoringOptions` (where metrics are served).
        limits: `ServingLimits`.
        enable_model_warmup: run assets.extra warmup requests on load.
        warmup_iterations: times each warmup request runs.
        allow_config_reload: accept ModelService.HandleReloadConfigRequest.
        signature_method_name_check: Classify only signatures whose method name
            is tensorflow/serving/classify (TF Serving's
            --enable_signature_method_name_check; off by default, as there).
        num_model_threads: threads that run model calls' slices (merged
            batches' included), per model, so one model's calls never hold the
            threads another needs (None: the number of CPUs, at least 2).
        web_page: serve the model page at "/" (False: "/" answers 404).
        static_dir: folder whose index.html (and other top-level files) are served
            at "/" instead of the packaged page, `WEB_PAGE_DIR`.
        shutdown_grace_s: how long in-flight requests may run at shutdown
            before the process exits anyway.
        max_num_load_retries: times a failed load is tried again.
        load_retry_interval_s: seconds between those tries.
        num_load_threads: models loaded in parallel (0: one at a time).
        num_request_threads: threads that parse and encode requests (None:
            four per CPU, at most 16).
        intra_op_threads: TensorFlow's intra-op threads (0: TensorFlow's choice).
        inter_op_threads: TensorFlow's inter-op threads (0: TensorFlow's choice).
        model_config_file: the file `model_config` was read from, re-read every
            `model_config_poll_seconds` when that is positive.
        model_config_poll_seconds: see `model_config_file`.
    """

    model_config: object
    host: str = "127.0.0.1"
    port: int = 8500
    rest_api_port: int | None = 8501
    rest_api_host: str | None = None
    batching: BatchingOptions | None = None
    poll_seconds: float = 1.0
    monitoring: MonitoringOptions = dataclasses.field(default_factory=MonitoringOptions)
    limits: ServingLimits = dataclasses.field(default_factory=ServingLimits)
    enable_model_warmup: bool = True
    warmup_iterations: int = 1
    allow_config_reload: bool = False
    signature_method_name_check: bool = False
    num_model_threads: int | None = None
    web_page: bool = True
    static_dir: str | None = None
    shutdown_grace_s: float = 5.0
    max_num_load_retries: int = 5
    load_retry_interval_s: float = 60.0
    num_load_threads: int = 0
    num_request_threads: int | None = None
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    model_config_file: str | None = None
    model_config_poll_seconds: float = 0.0

    @property
    def page_dir(self):
        """The folder served at "/", or None when the page is off."""
        if not self.web_page:
            return None
        return self.static_dir or WEB_PAGE_DIR

    @classmethod
    def from_model(cls, model_name, model_base_path, **kwargs):
        """Options for one model, as `--model_name --model_base_path` give."""
        return cls(model_config=single_model_config(
            model_name, os.path.abspath(model_base_path)), **kwargs)
