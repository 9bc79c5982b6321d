"""gRPC API through the official tensorflow_serving stubs."""

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_management_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from keras_transformer.serving import client as client_lib


@pytest.fixture(scope="module")
def channel(api_server):
    with grpc.insecure_channel(api_server.grpc_target) as channel:
        yield channel


def predict_request(name="tiny", texts=(b"hello",), signature="", version=None, label=None):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    if label is not None:
        request.model_spec.version_label = label
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(list(texts), dtype=tf.string))
    return request


def test_predict_with_official_stub_returns_outputs_and_resolved_spec(channel):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    response = stub.Predict(predict_request(texts=[b"hi", b"there"]), timeout=30)
    assert response.model_spec.name == "tiny"
    assert response.model_spec.version.value == 2
    assert response.model_spec.signature_name == "serving_default"
    assert tf.make_ndarray(response.outputs["translation"]).tolist() == [b"HI v2", b"THERE v2"]
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["score"]), [1.0, 2.5])


def test_predict_by_version_label_and_output_filter(channel):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = predict_request(label="stable")
    request.output_filter.append("version")
    response = stub.Predict(request, timeout=30)
    assert response.model_spec.version.value == 1
    assert set(response.outputs) == {"version"}


def test_get_model_metadata_packs_signature_def_map(channel):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "tiny"
    response = stub.GetModelMetadata(request, timeout=30)
    assert response.model_spec.version.value == 2
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(signature_map)
    text = signature_map.signature_def["serving_default"].inputs["text"]
    assert text.dtype == tf.string.as_datatype_enum
    assert [d.size for d in text.tensor_shape.dim] == [-1]


def test_get_model_status_via_model_service(channel):
    stub = model_service_pb2_grpc.ModelServiceStub(channel)
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "tiny"
    response = stub.GetModelStatus(request, timeout=30)
    available = get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert [(s.version, s.state, s.status.error_code) for s in response.model_version_status] == [
        (2, available, 0), (1, available, 0)]


def _code(call):
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value.code(), raised.value.details()


def test_grpc_errors_use_tf_serving_codes_and_server_keeps_serving(channel):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    wrong_dtype = predict_request()
    wrong_dtype.inputs["text"].CopyFrom(tf.make_tensor_proto([1.0, 2.0]))
    huge = predict_request()
    huge.inputs["text"].tensor_shape.dim[0].size = 1 << 40
    extra = predict_request()
    extra.inputs["other"].CopyFrom(tf.make_tensor_proto([b"x"]))
    unknown_output = predict_request()
    unknown_output.output_filter.append("nope")
    status = model_service_pb2_grpc.ModelServiceStub(channel)
    classify = classification_pb2.ClassificationRequest()
    classify.model_spec.name = "tiny"
    cases = [
        (lambda: stub.Predict(predict_request(name="nope"), timeout=30),
         grpc.StatusCode.NOT_FOUND, "Servable not found"),
        (lambda: stub.Predict(predict_request(version=9), timeout=30),
         grpc.StatusCode.NOT_FOUND, "Specific(tiny, 9)"),
        (lambda: stub.Predict(predict_request(label="nope"), timeout=30),
         grpc.StatusCode.INVALID_ARGUMENT, "Unrecognized servable version label"),
        (lambda: stub.Predict(predict_request(signature="nope"), timeout=30),
         grpc.StatusCode.INVALID_ARGUMENT, "not found in signature def"),
        (lambda: stub.Predict(predict_request(name="../etc"), timeout=30),
         grpc.StatusCode.INVALID_ARGUMENT, "not a plain identifier"),
        (lambda: stub.Predict(wrong_dtype, timeout=30),
         grpc.StatusCode.INVALID_ARGUMENT, "to be string but float is provided"),
        (lambda: stub.Predict(huge, timeout=30), grpc.StatusCode.INVALID_ARGUMENT, "elements"),
        (lambda: stub.Predict(extra, timeout=30),
         grpc.StatusCode.INVALID_ARGUMENT, "Send extra: {other}"),
        (lambda: stub.Predict(unknown_output, timeout=30),
         grpc.StatusCode.INVALID_ARGUMENT, "output tensor alias not found"),
        (lambda: stub.Classify(classify, timeout=30),
         grpc.StatusCode.INVALID_ARGUMENT, "Expected one or two output Tensors, found 4"),
        (lambda: stub.Classify(classification_pb2.ClassificationRequest(), timeout=30),
         grpc.StatusCode.INVALID_ARGUMENT, "Missing ModelSpec"),
        (lambda: stub.GetModelMetadata(get_model_metadata_pb2.GetModelMetadataRequest(
            model_spec={"name": "tiny"}, metadata_field=["nope"]), timeout=30),
         grpc.StatusCode.INVALID_ARGUMENT, "Metadata field nope is not supported"),
        (lambda: status.GetModelStatus(get_model_status_pb2.GetModelStatusRequest(
            model_spec={"name": "nope"}), timeout=30),
         grpc.StatusCode.NOT_FOUND, "Could not find any versions of model nope"),
        (lambda: status.HandleReloadConfigRequest(
            model_management_pb2.ReloadConfigRequest(), timeout=30),
         grpc.StatusCode.UNIMPLEMENTED, "disabled"),
    ]
    for call, expected_code, fragment in cases:
        code, details = _code(call)
        assert code == expected_code and fragment in details, (code, details)
    assert stub.Predict(predict_request(), timeout=30).model_spec.version.value == 2


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_translation_client_gives_the_same_answers_over_both_protocols(api_server, protocol):
    target = api_server.rest_url if protocol == "rest" else api_server.grpc_target
    with client_lib.TranslationClient(target, model_name="tiny") as client:
        assert client.translate(["hello", "wörld"]) == ["HELLO v2", "WöRLD v2"]
        outputs = client.predict({"a": ["x"], "b": [[1, 2]]}, signature_name="pair")
        assert outputs["joined"].tolist() == [b"x:3"]
        assert client.status()["model_version_status"][0]["state"] == "AVAILABLE"
        signatures = client.metadata()["metadata"]["signature_def"]["signature_def"]
        assert "serving_default" in signatures
    pinned = client_lib.TranslationClient(target, model_name="tiny", version_label="stable")
    assert pinned.translate(["a"]) == ["A"]
    with pytest.raises(client_lib.ServingError):
        client_lib.TranslationClient(target, model_name="nope").translate(["a"])
    pinned.close()


def test_clients_return_the_same_arrays_over_rest_and_grpc(api_server):
    answers = []
    for target in (api_server.rest_url, api_server.grpc_target):
        with client_lib.ServingClient(target, model_name="tiny") as client:
            answers.append(client.predict({"text": ["ab", "c"]}))
    rest, grpc_answer = answers
    assert set(rest) == set(grpc_answer)
    for name in rest:
        assert rest[name].dtype == grpc_answer[name].dtype, name
        assert rest[name].tolist() == grpc_answer[name].tolist(), name
