"""Flags (tensorflow_model_server's), option building, the compose file's command line,
and the rules that serving needs no model code and `--help` no TensorFlow."""

import argparse
import ast
import logging
import os
import pathlib
import socket
import subprocess
import sys

import pytest
import yaml

from serving_helpers import http
import tiny_models

from keras_transformer.serving import command
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import server as server_lib

SERVING_DIR = pathlib.Path(server_lib.__file__).parent
REPO = SERVING_DIR.parent.parent


def parse(*argv):
    return command.add_arguments(argparse.ArgumentParser()).parse_args(list(argv))


def test_tf_serving_flags_build_server_options(tmp_path):
    config_file = tmp_path / "models.config"
    config_file.write_text("model_config_list { config { name: 'zh_en' base_path: '/models/zh_en'"
                           " model_platform: 'tensorflow' } }")
    batching_file = tmp_path / "batching.txt"
    batching_file.write_text("max_batch_size { value: 16 } batch_timeout_micros { value: 2000 }")
    monitoring_file = tmp_path / "monitoring.config"
    monitoring_file.write_text('prometheus_config { enable: true, path: "/metrics" }')
    options = command.options_from_args(parse(
        "--model_config_file", str(config_file), "--port=9000", "--rest_api_port=0",
        "--enable_batching=true", "--batching_parameters_file", str(batching_file),
        "--enable_model_warmup=false",
        "--monitoring_config_file", str(monitoring_file), "--file_system_poll_wait_seconds=5",
        "--rest_api_timeout_in_ms=1500", "--max_request_bytes=1000",
        "--model_call_slice_in_ms=250"))
    assert options.model_config.model_config_list.config[0].name == "zh_en"
    assert (options.port, options.rest_api_port, options.host) == (9000, None, "127.0.0.1")
    assert options.batching.max_batch_size == 16 and options.batching.batch_timeout_micros == 2000
    assert options.monitoring.prometheus_path == "/metrics"
    assert options.poll_seconds == 5 and options.enable_model_warmup is False
    assert options.limits.request_timeout_s == 1.5 and options.limits.max_body_bytes == 1000
    assert options.limits.slice_seconds == 0.25


def test_single_model_flags_and_bad_combinations(tmp_path):
    options = command.options_from_args(parse("--model_name=zh_en",
                                                 f"--model_base_path={tmp_path}"))
    model = options.model_config.model_config_list.config[0]
    assert (model.name, model.base_path) == ("zh_en", str(tmp_path))
    assert options.batching is None and options.rest_api_port == 8501
    assert command.options_from_args(parse(f"--model_base_path={tmp_path}",
                                           "--enable_batching")).batching is not None
    with pytest.raises(config_lib.ConfigError):
        command.options_from_args(parse())
    with pytest.raises(config_lib.ConfigError):
        command.options_from_args(parse("--model_name=../x", f"--model_base_path={tmp_path}"))
    with pytest.raises(config_lib.ConfigError):
        command.options_from_args(parse(f"--model_base_path={tmp_path}",
                                           "--batching_parameters_file=x"))
    with pytest.raises(config_lib.ConfigError, match="--model_call_slice_in_ms must be positive"):
        command.options_from_args(parse(f"--model_base_path={tmp_path}",
                                           "--model_call_slice_in_ms=0"))


FORBIDDEN = ("keras", "keras_transformer.layers", "keras_transformer.models",
             "keras_transformer.ops", "keras_transformer.data", "keras_transformer.training",
             "keras_transformer.decoding", "keras_transformer.export", "keras_transformer.cli")


def test_serving_modules_import_no_model_code():
    for path in SERVING_DIR.glob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert not any(name == f or name.startswith(f + ".") for f in FORBIDDEN), \
                    f"{path.name} imports {name}"


# Every flag of tensorflow_model_server 2.21 (tensorflow_serving/model_servers/main.cc).
TF_SERVING_FLAGS = (
    "port", "grpc_socket_path", "rest_api_port", "rest_api_num_threads",
    "rest_api_timeout_in_ms", "rest_api_enable_cors_support", "enable_batching",
    "allow_version_labels_for_unavailable_models", "batching_parameters_file",
    "enable_per_model_batching_parameters", "model_config_file",
    "model_config_file_poll_wait_seconds", "model_name", "model_base_path", "num_load_threads",
    "num_unload_threads", "max_num_load_retries", "load_retry_interval_micros",
    "file_system_poll_wait_seconds", "flush_filesystem_caches", "tensorflow_session_parallelism",
    "tensorflow_session_config_file", "tensorflow_intra_op_parallelism",
    "tensorflow_inter_op_parallelism", "use_alts_credentials", "ssl_config_file",
    "platform_config_file", "per_process_gpu_memory_fraction", "saved_model_tags",
    "grpc_channel_arguments", "grpc_max_threads", "enable_model_warmup",
    "num_request_iterations_for_warmup", "version", "monitoring_config_file",
    "remove_unused_fields_from_bundle_metagraph", "prefer_tflite_model", "num_tflite_pools",
    "num_tflite_interpreters_per_pool", "enable_signature_method_name_check",
    "xla_cpu_compilation_enabled", "xla_gpu_compilation_enabled", "enable_profiler",
    "thread_pool_factory_config_file", "mixed_precision", "skip_initialize_tpu",
    "enable_grpc_healthcheck_service", "enable_serialization_as_tensor_content",
)


@pytest.mark.parametrize("name", TF_SERVING_FLAGS)
def test_every_tf_serving_flag_is_accepted(name):
    parse(f"--{name}" if name == "version" else f"--{name}=1")


def test_ignored_flags_warn_in_one_line_and_implemented_ones_take_effect(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        options = command.options_from_args(parse(
            f"--model_base_path={tmp_path}", "--ssl_config_file=/x", "--enable_profiler",
            "--max_num_load_retries=2", "--load_retry_interval_micros=250000",
            "--num_load_threads=3", "--rest_api_num_threads=5",
            "--tensorflow_session_parallelism=2", "--tensorflow_inter_op_parallelism=1",
            "--num_request_iterations_for_warmup=4", "--shutdown_grace_seconds=7",
            "--idle_timeout_seconds=9", "--max_values_per_input=100",
            "--enable_signature_method_name_check"))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["--ssl_config_file is a tensorflow_model_server flag this server ignores",
                        "--enable_profiler is a tensorflow_model_server flag this server ignores"]
    assert (options.max_num_load_retries, options.load_retry_interval_s) == (2, 0.25)
    assert (options.num_load_threads, options.num_request_threads) == (3, 5)
    assert (options.intra_op_threads, options.inter_op_threads) == (2, 1)
    assert options.warmup_iterations == 4 and options.shutdown_grace_s == 7
    assert options.limits.idle_timeout_s == 9 and options.limits.max_elements == 100
    assert options.signature_method_name_check is True
    assert command.options_from_args(
        parse(f"--model_base_path={tmp_path}")).signature_method_name_check is False
    with pytest.raises(config_lib.ConfigError, match="--max_num_load_retries must not be neg"):
        command.options_from_args(parse(f"--model_base_path={tmp_path}",
                                        "--max_num_load_retries=-1"))


@pytest.mark.parametrize("argv, fragment", [
    (["--model_base_path=/m", "--no_such_flag=1"], "unknown flag(s) --no_such_flag=1"),
    (["--model_base_path=/m", "--enable_batch"], "unknown flag(s) --enable_batch"),
    (["--port=eighty"], "argument --port: invalid int value: 'eighty'"),
])
def test_unknown_or_bad_flag_is_one_line(argv, fragment, capsys):
    with pytest.raises(SystemExit) as raised:
        command.main(argv)
    assert raised.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and fragment in error, error


def test_serve_help_imports_neither_tensorflow_nor_rpc_libraries():
    code = ("import sys; from keras_transformer.serving import command\n"
            "try:\n    command.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('tensorflow', 'grpc', 'aiohttp') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_server_module_knows_no_flags_and_command_imports_server_lazily():
    server_tree = ast.parse((SERVING_DIR / "server.py").read_text())
    names = {alias.name for node in ast.walk(server_tree) if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    assert "command" not in names
    assert "argparse" not in {alias.name for node in ast.walk(server_tree)
                              if isinstance(node, ast.Import) for alias in node.names}
    command_tree = ast.parse((SERVING_DIR / "command.py").read_text())
    top_level = {alias.name for node in command_tree.body
                 if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    assert not top_level & {"server", "tensorflow", "grpc", "aiohttp"}


def test_docker_compose_command_line_serves_with_the_embedded_server(saved_versions, tmp_path):
    compose = yaml.safe_load((REPO / "serving" / "docker-compose.yml").read_text())
    flags = compose["services"]["tf-serving"]["command"]
    mounts = {}  # Container path -> this repository's file, from the compose volumes.
    for volume in compose["services"]["tf-serving"]["volumes"]:
        source, target = volume.split(":")[:2]
        mounts[target] = (REPO / "serving" / source).resolve()
    models = tmp_path / "models"
    for name in ("zh_en", "zh_en_small"):
        for version in (1, 2):
            tiny_models.install_version(saved_versions[version], str(models / name), version)
    config_text = mounts["/config/models.config"].read_text()
    (tmp_path / "models.config").write_text(config_text.replace("'/models/", f"'{models}/"))
    argv = []
    for flag in flags:
        name, _, value = flag.partition("=")
        if value == "/config/models.config":
            value = str(tmp_path / "models.config")
        elif value in mounts:
            value = str(mounts[value])
        argv.append(f"{name}={value}" if value else name)
    with socket.socket() as probe:  # --rest_api_port=0 turns REST off, as in TF Serving.
        probe.bind(("127.0.0.1", 0))
        rest_port = probe.getsockname()[1]
    options = command.options_from_args(parse(*argv, "--port=0", f"--rest_api_port={rest_port}"))
    assert options.model_config_poll_seconds == 60 and options.batching is not None
    with server_lib.ServerThread(options) as running:
        status, body = http("POST", running.rest_url + "/v1/models/zh_en/labels/stable:predict",
                            {"instances": ["hi"]})
        assert status == 200 and body["predictions"][0]["version"] == 1
        status, body = http("GET", running.rest_url + "/v1/models/zh_en_small")
        assert [row["state"] for row in body["model_version_status"]] == ["AVAILABLE"]
        assert ":tensorflow:serving:request_count" in http(
            "GET", running.rest_url + "/monitoring/prometheus/metrics")[1]


@pytest.mark.parametrize("name, accepted", [
    ("zh_en", True), ("zh-en.v2", True), ("_x", True), ("7", True),
    ("", False), (".", False), ("..", False), (".hidden", False), ("-flag", False),
    ("a/b", False), ("a b", False), ("zh_en\n", False), ("中文", False), (None, False)])
def test_exporter_and_server_share_one_model_name_rule(name, accepted):
    from keras_transformer.export import writer

    outcomes = []
    for check, error in ((writer.check_model_name, ValueError),
                         (config_lib.check_model_name, config_lib.ConfigError)):
        try:
            check(name)
            outcomes.append(True)
        except error as raised:
            assert "letters, digits, '_', '.' or '-'" in str(raised)
            outcomes.append(False)
    assert outcomes == [accepted, accepted]
