"""The language-model export (from an lm run folder): signatures, determinism, loaders, server."""

import json
import os

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_log_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from export_helpers import graph_ops_report
from export_helpers import last_json_line
from export_helpers import post
from export_helpers import run_python
from keras_transformer.export.writer import WARMUP_FILE
from keras_transformer.serving import server as server_lib

PROMPTS = ["Tom is", "", "I want to " * 20]
SAMPLING = ("temperature", "top_k", "top_p", "seed", "max_new_tokens")


@pytest.fixture(scope="module")
def exported(lm_run, tmp_path_factory):
    from keras_transformer.export.command import export_run

    base = tmp_path_factory.mktemp("export")
    path = export_run(lm_run, "english", base=str(base), max_new_tokens=6, preset=False)
    return base, path


@pytest.fixture(scope="module")
def loaded(exported):
    return tf.saved_model.load(exported[1])


def sample(loaded, texts, temperature=1.0, top_k=0, top_p=1.0, seed=1, max_new_tokens=6):
    rows = len(texts)
    result = loaded.signatures["sample"](
        text=tf.constant(texts), temperature=tf.fill([rows], float(temperature)),
        top_k=tf.fill([rows], top_k), top_p=tf.fill([rows], float(top_p)),
        seed=tf.constant(seed if isinstance(seed, list) else [seed] * rows, tf.int64),
        max_new_tokens=tf.fill([rows], max_new_tokens))
    return [t.decode() for t in result["generation"].numpy()]


def test_manifest_assets_and_signatures(exported):
    from keras_transformer.serving.servable import read_signature_defs

    _, path = exported
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    assert manifest["task"] == "lm" and manifest["signatures"] == ["sample", "serving_default"]
    assert manifest["generation"]["max_new_tokens"] == 6
    assert os.path.exists(os.path.join(path, "assets", "tokenizer.model"))
    defs = read_signature_defs(path).signature_def

    def spec(info):
        return tf.as_dtype(info.dtype).name, [d.size for d in info.tensor_shape.dim]

    assert {k: spec(v) for k, v in defs["serving_default"].inputs.items()} == {
        "text": ("string", [-1])}
    assert {k: spec(v) for k, v in defs["serving_default"].outputs.items()} == {
        "generation": ("string", [-1])}
    assert {k: spec(v) for k, v in defs["sample"].inputs.items()} == {
        "text": ("string", [-1]), "temperature": ("float32", [-1]), "top_k": ("int32", [-1]),
        "top_p": ("float32", [-1]), "seed": ("int64", [-1]), "max_new_tokens": ("int32", [-1])}
    assert {k: spec(v) for k, v in defs["sample"].outputs.items()} == {
        "generation": ("string", [-1])}


def test_greedy_is_sample_at_temperature_zero(loaded):
    greedy = [t.decode() for t in
              loaded.signatures["serving_default"](text=tf.constant(PROMPTS))["generation"].numpy()]
    assert greedy[:2] == sample(loaded, PROMPTS[:2], temperature=0.0, seed=[1, 2])
    # sample refuses a text too long for its new subwords; serving_default keeps its end.
    with pytest.raises(tf.errors.InvalidArgumentError, match="lower max_new_tokens"):
        sample(loaded, PROMPTS[2:], temperature=0.0)


def test_same_seed_same_text_and_other_seeds_differ(loaded):
    first = sample(loaded, ["Tom is"] * 4, seed=[5, 5, 6, 7], max_new_tokens=8)
    assert first[0] == first[1]
    assert len(set(first[1:])) > 1
    assert sample(loaded, ["Tom is"], seed=5, max_new_tokens=8) == first[:1]


def test_one_value_per_row_is_required(loaded):
    with pytest.raises(tf.errors.InvalidArgumentError, match="one value per text"):
        loaded.signatures["sample"](
            text=tf.constant(["a", "b"]), temperature=tf.constant([1.0]),
            top_k=tf.constant([0, 0]), top_p=tf.constant([1.0, 1.0]),
            seed=tf.constant([1, 2], tf.int64), max_new_tokens=tf.constant([3, 3]))


def test_tf1_loader_runs_sample_by_tensor_names(exported, loaded):
    expected = sample(loaded, PROMPTS[:1], seed=9)
    report = last_json_line(run_python(
        """
        import json, sys
        import tensorflow as tf
        import tensorflow_text
        tf.compat.v1.disable_eager_execution()
        with tf.compat.v1.Session(graph=tf.Graph()) as session:
            meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], sys.argv[1])
            signature = meta.signature_def["sample"]
            values = {"text": [sys.argv[2]], "temperature": [1.0], "top_k": [0],
                      "top_p": [1.0], "seed": [9], "max_new_tokens": [6]}
            feed = {signature.inputs[k].name: v for k, v in values.items()}
            fetched = session.run(signature.outputs["generation"].name, feed_dict=feed)
        print(json.dumps([t.decode() for t in fetched]))
        """,
        exported[1], PROMPTS[0],
    ))
    assert report == expected


def test_graph_uses_only_core_tensorflow_and_tensorflow_text_ops(exported):
    report = graph_ops_report(exported[1])
    assert report["outside"] == [] and report["xla"] == []
    assert any("Sentencepiece" in op for op in report["text"])


def test_warmup_replays_both_signatures(exported):
    from keras_transformer.serving import servable as servable_lib
    from keras_transformer.serving import tensors
    from keras_transformer.serving import warmup

    _, path = exported
    names = sorted(
        prediction_log_pb2.PredictionLog.FromString(r.numpy()).predict_log.request
        .model_spec.signature_name
        for r in tf.data.TFRecordDataset(os.path.join(path, "assets.extra", WARMUP_FILE)))
    assert set(names) == {"sample", "serving_default"}
    assert warmup.run_warmup(servable_lib.Servable(path), tensors.tensor_from_proto) == len(names)


@pytest.fixture(scope="module")
def served(exported):
    base, _ = exported
    options = server_lib.ServerOptions.from_model(
        "english", str(base / "english"), port=0, rest_api_port=0, poll_seconds=0,
        web_page=False)
    with server_lib.ServerThread(options) as running:
        yield running


def test_embedded_server_rest_predict_with_the_sample_signature(loaded, served):
    settings = {"temperature": 0.9, "top_k": 20, "top_p": 0.9, "seed": 4, "max_new_tokens": 6}
    status, body = post(served, "/v1/models/english:predict", {
        "signature_name": "sample", "instances": [{"text": "Tom is", **settings}]})
    assert status == 200, body
    assert body["predictions"] == sample(loaded, ["Tom is"], **settings)
    status, body = post(served, "/v1/models/english:predict", {"instances": PROMPTS[:2]})
    assert status == 200, body
    assert body["predictions"] == sample(loaded, PROMPTS[:2], temperature=0.0)
    status, body = post(served, "/v1/models/english:classify", {"examples": [{"text": "a"}]})
    assert status == 400 and "No classification inputs" in body["error"], body


def test_embedded_server_answers_an_empty_columnar_request_with_no_rows(served):
    status, body = post(served, "/v1/models/english:predict", {"inputs": {"text": []}})
    assert status == 200, body
    assert body == {"outputs": []}
    # The row format needs a row, as in TF Serving.
    status, body = post(served, "/v1/models/english:predict", {"instances": []})
    assert status == 400 and "No values in 'instances' array" in body["error"], body


def test_embedded_server_grpc_predict(loaded, served):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "english"
    request.model_spec.signature_name = "sample"
    values = {"text": tf.constant(["Tom is"]), "temperature": tf.constant([1.0]),
              "top_k": tf.constant([0]), "top_p": tf.constant([1.0]),
              "seed": tf.constant([12], tf.int64), "max_new_tokens": tf.constant([6])}
    for name, value in values.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    with grpc.insecure_channel(served.grpc_target) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            request, timeout=60)
    generated = [t.decode() for t in tf.make_ndarray(response.outputs["generation"])]
    assert generated == sample(loaded, ["Tom is"], seed=12)
    assert np.ndim(generated) == 1


def test_export_command_line_passes_the_generation_settings(lm_run, tmp_path, capsys):
    from keras_transformer.cli import main

    assert main(["export", "--run", lm_run, "--name", "english", "--base", str(tmp_path),
                 "--max-new-tokens", "5", "--max-length", "20", "--no-preset"]) == 0
    path = tmp_path / "english" / "1"
    assert f"exported {path}" in capsys.readouterr().out
    manifest = json.load(open(path / "manifest.json"))
    assert manifest["generation"] == {"max_new_tokens": 5, "xla": False}
    assert manifest["max_length"] == 20 and not (path / "model.keras").exists()
