"""Flags, option building, and the rule that serving needs no model code."""

import argparse
import ast
import pathlib

import pytest

from keras_transformer.serving import command
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import server as server_lib

SERVING_DIR = pathlib.Path(server_lib.__file__).parent


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
        "--rest_api_timeout_in_ms=1500", "--max_request_bytes=1000"))
    assert options.model_config.model_config_list.config[0].name == "zh_en"
    assert (options.port, options.rest_api_port, options.host) == (9000, None, "127.0.0.1")
    assert options.batching.max_batch_size == 16 and options.batching.batch_timeout_micros == 2000
    assert options.monitoring.prometheus_path == "/metrics"
    assert options.poll_seconds == 5 and options.enable_model_warmup is False
    assert options.limits.request_timeout_s == 1.5 and options.limits.max_body_bytes == 1000


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
