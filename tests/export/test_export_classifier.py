"""The classifier export: its signatures for TF Serving, the TF1 loader, the embedded server."""

import base64
import json
import os

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_log_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from export_helpers import graph_ops_report
from export_helpers import last_json_line
from export_helpers import post
from export_helpers import run_python
from keras_transformer.export import ClassificationModule
from keras_transformer.export import write_export
from keras_transformer.export.writer import WARMUP_FILE
from keras_transformer.serving import server as server_lib

LABELS = ["question", "exclamation", "statement"]
TEXTS = ["Where are you going?", "", "What a day!", "Tom went home. " * 20]


@pytest.fixture(scope="module")
def exported(english_tokenizer, tmp_path_factory):
    import keras

    from keras_transformer import build_classifier

    keras.utils.set_random_seed(3)
    model = build_classifier("tiny", vocab_size=english_tokenizer.vocab_size,
                             num_classes=len(LABELS))
    module = ClassificationModule(model, english_tokenizer, LABELS, max_length=16)
    base = tmp_path_factory.mktemp("export")
    path = write_export(module, str(base), "sentence_type", warmup_texts=TEXTS[:2])
    return module, base, path


def _example(text):
    example = tf.train.Example()
    example.features.feature["text"].bytes_list.value.append(text.encode("utf-8"))
    return example


def test_signatures_have_the_agreed_names_types_and_methods(exported):
    _, _, path = exported
    from keras_transformer.serving.servable import read_signature_defs

    defs = read_signature_defs(path).signature_def
    default, classify = defs["serving_default"], defs["classify"]
    assert default.method_name == "tensorflow/serving/predict"
    assert classify.method_name == "tensorflow/serving/classify"

    def spec(info):
        return tf.as_dtype(info.dtype).name, [d.size for d in info.tensor_shape.dim]

    assert {k: spec(v) for k, v in default.inputs.items()} == {"text": ("string", [-1])}
    assert {k: spec(v) for k, v in default.outputs.items()} == {
        "label": ("string", [-1]), "probabilities": ("float32", [-1, 3])}
    assert {k: spec(v) for k, v in classify.inputs.items()} == {"inputs": ("string", [-1])}
    assert {k: spec(v) for k, v in classify.outputs.items()} == {
        "classes": ("string", [-1, 3]), "scores": ("float32", [-1, 3])}


def test_text_and_example_signatures_agree_and_probabilities_are_distributions(exported):
    module, _, path = exported
    loaded = tf.saved_model.load(path)
    by_text = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
    serialized = tf.constant([_example(t).SerializeToString() for t in TEXTS])
    by_example = loaded.signatures["classify"](inputs=serialized)
    probabilities = by_text["probabilities"].numpy()
    assert np.all(np.isfinite(probabilities))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(by_example["scores"].numpy(), probabilities, atol=1e-6)
    assert by_example["classes"].numpy().tolist() == [[s.encode() for s in LABELS]] * len(TEXTS)
    assert [s.decode() for s in by_text["label"].numpy()] == [
        LABELS[i] for i in probabilities.argmax(axis=1)]
    in_process = module.classify_text(tf.constant(TEXTS))["probabilities"].numpy()
    np.testing.assert_allclose(probabilities, in_process, atol=1e-6)
    np.testing.assert_allclose(probabilities[1], 1 / 3)  # The empty text: no evidence.


def test_tf1_loader_classifies_serialized_examples_by_tensor_names(exported):
    module, _, path = exported
    expected = module.classify_text(tf.constant(TEXTS[:1]))["probabilities"].numpy()
    output = run_python(
        """
        import base64, json, sys
        import tensorflow as tf
        import tensorflow_text
        tf.compat.v1.disable_eager_execution()
        with tf.compat.v1.Session(graph=tf.Graph()) as session:
            meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], sys.argv[1])
            signature = meta.signature_def["classify"]
            feed = {signature.inputs["inputs"].name: [base64.b64decode(sys.argv[2])]}
            classes, scores = session.run([signature.outputs["classes"].name,
                                           signature.outputs["scores"].name], feed_dict=feed)
        print(json.dumps({"method": signature.method_name, "scores": scores.tolist(),
                          "classes": [[c.decode() for c in row] for row in classes]}))
        """,
        path, base64.b64encode(_example(TEXTS[0]).SerializeToString()).decode(),
    )
    report = last_json_line(output)
    assert report["method"] == "tensorflow/serving/classify"
    assert report["classes"] == [LABELS]
    np.testing.assert_allclose(report["scores"], expected, atol=1e-5)


def test_graph_uses_only_core_tensorflow_and_tensorflow_text_ops(exported):
    report = graph_ops_report(exported[2])
    assert report["outside"] == [] and report["xla"] == []
    assert any("Sentencepiece" in op for op in report["text"])


def test_warmup_holds_predict_and_classify_logs_that_the_server_replays(exported):
    from keras_transformer.serving import servable as servable_lib
    from keras_transformer.serving import tensors
    from keras_transformer.serving import warmup

    _, _, path = exported
    kinds = [prediction_log_pb2.PredictionLog.FromString(r.numpy()).WhichOneof("log_type")
             for r in tf.data.TFRecordDataset(os.path.join(path, "assets.extra", WARMUP_FILE))]
    assert sorted(kinds) == ["classify_log"] * 2 + ["predict_log"] * 2
    servable = servable_lib.Servable(path)
    assert warmup.run_warmup(servable, tensors.tensor_from_proto, method_name_check=True) == 4


@pytest.fixture(scope="module")
def served(exported):
    _, base, _ = exported
    options = server_lib.ServerOptions.from_model(
        "sentence_type", str(base / "sentence_type"), port=0, rest_api_port=0, poll_seconds=0,
        web_page=False, signature_method_name_check=True)
    with server_lib.ServerThread(options) as running:
        yield running


def test_embedded_server_rest_predict_and_classify(exported, served):
    module = exported[0]
    expected = module.classify_text(tf.constant(TEXTS[:2]))
    status, body = post(served, "/v1/models/sentence_type:predict", {"instances": TEXTS[:2]})
    assert status == 200, body
    assert [row["label"] for row in body["predictions"]] == [
        s.decode() for s in expected["label"].numpy()]
    np.testing.assert_allclose([row["probabilities"] for row in body["predictions"]],
                               expected["probabilities"].numpy(), atol=1e-6)
    status, body = post(served, "/v1/models/sentence_type:classify", {
        "signature_name": "classify", "examples": [{"text": t} for t in TEXTS[:2]]})
    assert status == 200, body
    for row, probabilities in zip(body["results"], expected["probabilities"].numpy()):
        assert [label for label, _ in row] == LABELS
        np.testing.assert_allclose([score for _, score in row], probabilities, atol=1e-6)
    status, body = post(served, "/v1/models/sentence_type:classify", {
        "signature_name": "classify", "examples": [{"sentence": "no text feature"}]})
    assert status == 400 and "text" in body["error"], body


def test_embedded_server_grpc_predict_and_classify(exported, served):
    module = exported[0]
    expected = module.classify_text(tf.constant(TEXTS[:2]))["probabilities"].numpy()
    with grpc.insecure_channel(served.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "sentence_type"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto(TEXTS[:2], dtype=tf.string))
        response = stub.Predict(request, timeout=60)
        np.testing.assert_allclose(tf.make_ndarray(response.outputs["probabilities"]),
                                   expected, atol=1e-6)
        request = classification_pb2.ClassificationRequest()
        request.model_spec.name = "sentence_type"
        request.model_spec.signature_name = "classify"
        for text in TEXTS[:2]:
            request.input.example_list.examples.add().CopyFrom(_example(text))
        response = stub.Classify(request, timeout=60)
    assert response.model_spec.version.value == 1
    got = [[(c.label, c.score) for c in row.classes] for row in response.result.classifications]
    assert [[label for label, _ in row] for row in got] == [LABELS, LABELS]
    np.testing.assert_allclose([[score for _, score in row] for row in got], expected, atol=1e-6)


def test_labels_must_be_distinct(exported):
    module = exported[0]
    with pytest.raises(ValueError, match="distinct"):
        ClassificationModule(module.model, module.tokenizer, ["a", "a", "b"], 8)
    assert list(module.labels) == LABELS


def test_export_command_reads_the_task_labels_and_tokenizer_from_a_classify_run(
        classify_run, tmp_path):
    from keras_transformer.export.command import export_run
    from keras_transformer.runs.folder import RunFolder

    path = export_run(classify_run, "sentence_type", base=str(tmp_path), preset=False)
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    labels = RunFolder(classify_run).read_labels()
    assert manifest["task"] == "classify" and manifest["labels"] == labels
    assert manifest["signatures"] == ["classify", "serving_default"]
    assert os.path.exists(os.path.join(path, "assets", "tokenizer.model"))
    scores = tf.saved_model.load(path).signatures["classify"](
        inputs=tf.constant([_example("Who is it?").SerializeToString()]))
    assert [c.decode() for c in scores["classes"].numpy()[0]] == labels
