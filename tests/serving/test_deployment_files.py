"""The files in serving/ parse as TF Serving would read them and agree with each other."""

import pathlib
import re

import pytest
import tensorflow as tf

from keras_transformer.serving import config as config_lib

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "serving"


def test_config_files_parse():
    model_config = config_lib.read_model_config_file(DEPLOY / "models.config")
    models = {m.name: m for m in model_config.model_config_list.config}
    assert "zh_en" in models and len(models) == 2
    assert dict(models["zh_en"].version_labels) == {"stable": 1, "canary": 2}
    assert all(m.base_path == f"/models/{m.name}" for m in models.values())
    batching = config_lib.read_batching_parameters_file(DEPLOY / "batching_parameters.txt")
    assert batching.max_batch_size == 32
    monitoring = config_lib.read_monitoring_config_file(DEPLOY / "monitoring.config")
    assert monitoring.prometheus_path == "/monitoring/prometheus/metrics"


def test_image_tag_matches_the_exporting_tensorflow_and_probe_targets_zh_en():
    major_minor = ".".join(tf.__version__.split(".")[:2])
    for name in ("docker-compose.yml", "kubernetes.yaml"):
        text = (DEPLOY / name).read_text()
        tags = set(re.findall(r"image:\s*tensorflow/serving:(\S+)", text))
        assert tags and all(tag.startswith(major_minor + ".") for tag in tags), (name, tags)
        for flag in re.findall(r"--(\w+)_file=/config/(\S+)", text):
            assert (DEPLOY / flag[1]).exists(), flag
    kubernetes = (DEPLOY / "kubernetes.yaml").read_text()
    assert re.search(r"readinessProbe:\s*\n\s*httpGet: \{path: /v1/models/zh_en,", kubernetes)


def test_yaml_documents_are_well_formed():
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert "../export:/models:ro" in compose["services"]["tf-serving"]["volumes"]
    kinds = [doc["kind"] for doc in yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text())]
    assert kinds == ["Deployment", "Service", "HorizontalPodAutoscaler"]
