"""Version manager, version folders and config parsing, without TensorFlow models."""

import os

import pytest

from keras_transformer.serving import config as config_lib
from keras_transformer.serving import errors
from keras_transformer.serving import manager
from keras_transformer import versions


class FakeServable:
    def __init__(self, path):
        self.path = path
        self.unloaded = False

    def unload(self):
        self.unloaded = True


class FakeLoader:
    """Loads every folder except those named in `broken`."""

    def __init__(self):
        self.broken = set()
        self.loaded = []

    def __call__(self, path):
        if os.path.basename(path) in self.broken:
            raise errors.ServingError("DATA_LOSS", f"cannot parse {path}")
        servable = FakeServable(path)
        self.loaded.append(servable)
        return servable


def make_versions(base, *names):
    for name in names:
        os.makedirs(os.path.join(base, str(name)), exist_ok=True)


def registry_for(base, policy="", labels=None, loader=None):
    labels_text = "".join(f" version_labels {{ key: '{k}' value: {v} }}"
                          for k, v in (labels or {}).items())
    config = config_lib.parse_model_config(
        f"model_config_list {{ config {{ name: 'm' base_path: '{base}' "
        f"model_platform: 'tensorflow' {policy} {labels_text} }} }}")
    return manager.ModelRegistry(config, loader or FakeLoader(), poll_seconds=0)


def states(registry):
    return {row.version: row.state.value for row in registry.status("m")}


def test_only_integer_folders_are_versions(tmp_path):
    make_versions(tmp_path, 1, 12, "007", "tmp-3", "3.5", "-4", "٣")
    (tmp_path / "5").write_text("a file, not a folder")
    assert versions.list_versions(str(tmp_path)) == [1, 7, 12]
    assert versions.next_version(str(tmp_path)) == 13
    assert versions.list_versions(str(tmp_path / "missing")) == []
    assert versions.next_version(str(tmp_path / "missing")) == 1
    assert versions.is_version_dir(str(tmp_path), "12")
    assert not versions.is_version_dir(str(tmp_path), "tmp-3")


def test_latest_policy_loads_newest_and_retires_older(tmp_path):
    make_versions(tmp_path, 1, 2, 3)
    registry = registry_for(tmp_path, "model_version_policy { latest { num_versions: 2 } }")
    registry.poll_once()
    assert states(registry) == {3: "AVAILABLE", 2: "AVAILABLE"}
    make_versions(tmp_path, 4)
    registry.poll_once()
    assert states(registry) == {4: "AVAILABLE", 3: "AVAILABLE", 2: "END"}


def test_specific_and_all_policies(tmp_path):
    make_versions(tmp_path, 1, 2, 3)
    specific = registry_for(tmp_path, "model_version_policy { specific { versions: [1, 3] } }")
    specific.poll_once()
    assert states(specific) == {3: "AVAILABLE", 1: "AVAILABLE"}
    everything = registry_for(tmp_path, "model_version_policy { all {} }")
    everything.poll_once()
    assert states(everything) == {3: "AVAILABLE", 2: "AVAILABLE", 1: "AVAILABLE"}


def test_old_version_unloads_only_after_its_in_flight_request_ends(tmp_path):
    make_versions(tmp_path, 1)
    loader = FakeLoader()
    registry = registry_for(tmp_path, loader=loader)
    registry.poll_once()
    in_flight = registry.acquire("m")
    assert in_flight.version == 1
    make_versions(tmp_path, 2)
    registry.poll_once()
    assert states(registry) == {2: "AVAILABLE", 1: "UNLOADING"}
    with registry.acquire("m") as handle:
        assert handle.version == 2  # New requests go to version 2 at once.
    assert not loader.loaded[0].unloaded
    in_flight.release()
    assert states(registry) == {2: "AVAILABLE", 1: "END"}
    assert loader.loaded[0].unloaded
    with pytest.raises(errors.ServingError, match=r"Specific\(m, 1\)"):
        registry.acquire("m", version=1)


def test_failed_version_keeps_previous_serving_and_reports_error(tmp_path):
    make_versions(tmp_path, 1)
    loader = FakeLoader()
    registry = registry_for(tmp_path, loader=loader)
    registry.poll_once()
    loader.broken.add("2")
    make_versions(tmp_path, 2)
    registry.poll_once()
    registry.poll_once()  # Not retried while the folder is unchanged.
    rows = {row.version: row for row in registry.status("m")}
    assert rows[1].state.value == "AVAILABLE"
    assert rows[2].state.value == "END" and "cannot parse" in rows[2].error.message
    with registry.acquire("m") as handle:
        assert handle.version == 1
    assert len(loader.loaded) == 1
    # Replacing the broken folder (new export under the same number) retries it.
    loader.broken.clear()
    os.rename(tmp_path / "2", tmp_path / "broken-2")
    make_versions(tmp_path, 2)
    os.utime(tmp_path / "2", ns=(1, 1))
    registry.poll_once()
    assert states(registry) == {2: "AVAILABLE", 1: "END"}


def test_labels_resolve_and_unknown_label_is_invalid_argument(tmp_path):
    make_versions(tmp_path, 1, 2)
    registry = registry_for(tmp_path, "model_version_policy { all {} }",
                            labels={"stable": 1, "next": 5})
    registry.poll_once()
    with registry.acquire("m", label="stable") as handle:
        assert handle.version == 1
    with pytest.raises(errors.ServingError) as raised:
        registry.acquire("m", label="nope")
    assert raised.value.code == "INVALID_ARGUMENT"
    with pytest.raises(errors.ServingError) as raised:
        registry.acquire("m", label="next")
    assert raised.value.code == "NOT_FOUND"


def test_empty_base_path_unloads_nothing(tmp_path):
    make_versions(tmp_path, 1)
    registry = registry_for(tmp_path)
    registry.poll_once()
    os.rename(tmp_path / "1", tmp_path / "gone")
    registry.poll_once()
    assert states(registry) == {1: "AVAILABLE"}


def test_model_names_must_be_plain_identifiers(tmp_path):
    registry = registry_for(tmp_path)
    for name in ("../m", "m/1", "", "a b", ".."):
        with pytest.raises(errors.ServingError) as raised:
            registry.acquire(name)
        assert raised.value.code == "INVALID_ARGUMENT"
    with pytest.raises(config_lib.ConfigError):
        config_lib.parse_model_config(
            "model_config_list { config { name: 'a/b' base_path: '/x' } }")


def test_model_config_validation():
    with pytest.raises(config_lib.ConfigError, match="multiple times"):
        config_lib.parse_model_config(
            "model_config_list { config { name: 'a' base_path: '/x' } "
            "config { name: 'a' base_path: '/y' } }")
    with pytest.raises(config_lib.ConfigError, match="base_path"):
        config_lib.parse_model_config("model_config_list { config { name: 'a' } }")
    with pytest.raises(config_lib.ConfigError, match="platform"):
        config_lib.parse_model_config(
            "model_config_list { config { name: 'a' base_path: '/x' model_platform: 'onnx' } }")
    with pytest.raises(config_lib.ConfigError, match="Invalid model config"):
        config_lib.parse_model_config("model_config_list { config { nam: 'a' } }")
    config = config_lib.single_model_config("zh_en", "/models/zh_en")
    assert config_lib.version_policy(config.model_config_list.config[0]) == ("latest", 1)


def test_batching_and_monitoring_files_parse_like_tf_serving():
    options = config_lib.parse_batching_parameters(
        "max_batch_size { value: 32 } batch_timeout_micros { value: 1000 } "
        "num_batch_threads { value: 4 } max_enqueued_batches { value: 100 } "
        "allowed_batch_sizes: 8 allowed_batch_sizes: 32 pad_variable_length_inputs: true")
    assert options == config_lib.BatchingOptions(
        max_batch_size=32, batch_timeout_micros=1000, num_batch_threads=4,
        max_enqueued_batches=100, allowed_batch_sizes=(8, 32), pad_variable_length_inputs=True)
    with pytest.raises(config_lib.ConfigError, match="must match max_batch_size"):
        config_lib.parse_batching_parameters(
            "max_batch_size { value: 32 } allowed_batch_sizes: 8 allowed_batch_sizes: 16")
    with pytest.raises(config_lib.ConfigError, match="Invalid batching"):
        config_lib.parse_batching_parameters("max_batch_size: 32")
    monitoring = config_lib.parse_monitoring_config(
        'prometheus_config { enable: true, path: "/metrics" }')
    assert monitoring.prometheus_path == "/metrics"
    assert config_lib.parse_monitoring_config(
        "prometheus_config { enable: false }").prometheus_path is None
