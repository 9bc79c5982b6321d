"""Classify (REST :classify and gRPC Classify) on a genuine classification signature."""

import base64
import concurrent.futures
import re

import grpc
import pytest
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

import tiny_models
from serving_helpers import http
from serving_helpers import MAX_INSTANCES
from serving_helpers import wait_until
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import server as server_lib

PREDICT_METHOD_MESSAGE = ("Expected classification signature method_name to be "
                          "tensorflow/serving/classify. Was: tensorflow/serving/predict")


def _serve(base, method_name_check=False, batching=None):
    options = server_lib.ServerOptions.from_model(
        "cls", base, port=0, rest_api_port=0, poll_seconds=0, web_page=False,
        signature_method_name_check=method_name_check, batching=batching,
        limits=config_lib.ServingLimits(max_instances=MAX_INSTANCES))
    return server_lib.ServerThread(options)


@pytest.fixture(scope="module")
def classifier_base(tmp_path_factory):
    root = tmp_path_factory.mktemp("classifier")
    saved = tiny_models.save_tiny_classifier(str(root / "saved"))
    version = tiny_models.install_version(saved, str(root / "cls"), 3)
    tiny_models.write_classify_warmup(version, ["warm?", "up!"])
    return str(root / "cls")


@pytest.fixture(scope="module")
def running(classifier_base):
    with _serve(classifier_base) as running:
        yield running


@pytest.fixture(scope="module")
def stub(running):
    with grpc.insecure_channel(running.grpc_target) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def classify(running, body, path="/v1/models/cls:classify"):
    return http("POST", running.rest_url + path, body)


def _row(kind):
    return [[label, 0.8 if label == kind else 0.1] for label in tiny_models.LABELS]


def test_rest_classify_returns_label_score_pairs_per_example(running):
    status, body = classify(running, {"signature_name": "classify", "examples": [
        {"text": "Who is there?"},
        {"text": {"b64": base64.b64encode("走开!".encode()).decode()}},
        {"text": ["It rains."], "unused": [1.5, 2.5], "count": [1, True]},
    ]})
    assert status == 200, body
    assert body == {"results": [_row("question"), _row("exclamation"), _row("statement")]}


def test_rest_context_is_shared_and_an_example_feature_overrides_it(running):
    status, body = classify(running, {"signature_name": "classify",
                                      "context": {"text": "from the context?"},
                                      "examples": [{}, {"text": "own!"}]})
    assert status == 200, body
    assert body["results"] == [_row("question"), _row("exclamation")]


def test_a_scores_only_signature_gives_empty_labels(running):
    status, body = classify(running, {"signature_name": "scores_only",
                                      "examples": [{"text": "hi!"}]})
    assert status == 200, body
    assert body["results"] == [[["", 0.1], ["", 0.8], ["", 0.1]]]


def test_version_in_the_url_chooses_the_version(running):
    status, body = classify(running, {"signature_name": "classify", "examples": [{"text": "a"}]},
                            path="/v1/models/cls/versions/3:classify")
    assert (status, body) == (200, {"results": [_row("statement")]})


def _request(texts, signature="classify", context=None):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "cls"
    request.model_spec.signature_name = signature
    if context is None:
        listed = request.input.example_list
    else:
        listed = request.input.example_list_with_context
        listed.context.features.feature["text"].bytes_list.value.append(context)
    for text in texts:
        example = listed.examples.add()
        if text is not None:
            example.features.feature["text"].bytes_list.value.append(text)
    return request


def test_grpc_classify_with_the_official_stub(stub):
    response = stub.Classify(_request([b"why?", b"no"]), timeout=30)
    assert response.model_spec.name == "cls"
    assert response.model_spec.version.value == 3
    assert response.model_spec.signature_name == "classify"
    rows = [[(c.label, round(c.score, 6)) for c in row.classes]
            for row in response.result.classifications]
    assert rows == [[("question", 0.8), ("exclamation", 0.1), ("statement", 0.1)],
                    [("question", 0.1), ("exclamation", 0.1), ("statement", 0.8)]]


def test_grpc_example_list_with_context(stub):
    response = stub.Classify(_request([None, b"wow!"], context=b"shared?"), timeout=30)
    best = [max(row.classes, key=lambda c: c.score).label
            for row in response.result.classifications]
    assert best == ["question", "exclamation"]


def test_a_predict_method_signature_of_classifier_shape_classifies_by_default(running):
    # Stock TF Serving checks method names only with --enable_signature_method_name_check.
    status, body = classify(running, {"signature_name": "classify_as_predict",
                                      "examples": [{"text": "ok?"}]})
    assert (status, body) == (200, {"results": [_row("question")]})


def test_method_name_check_refuses_predict_signatures_as_tf_serving_does(classifier_base):
    with _serve(classifier_base, method_name_check=True) as strict:
        status, body = classify(strict, {"signature_name": "classify_as_predict",
                                         "examples": [{"text": "ok?"}]})
        assert (status, body) == (400, {"error": PREDICT_METHOD_MESSAGE})
        status, body = classify(strict, {"signature_name": "classify",
                                         "examples": [{"text": "ok?"}]})
        assert (status, body) == (200, {"results": [_row("question")]})


BAD_BODIES = [
    # (body, fragment of the error)
    ({"examples": [{"text": "a"}]}, "No classification inputs found in SignatureDef"),
    ({"signature_name": "nope", "examples": [{"text": "a"}]},
     "No signature was found with the name: nope"),
    ({"signature_name": "classify", "examples": {"text": "a"}},
     "Expecting 'examples' value to be an list/array"),
    ({"signature_name": "classify", "examples": []}, "'examples' value is an empty array"),
    ({"signature_name": "classify", "examples": ["a"]},
     "Example must be JSON object but got JSON String"),
    ({"signature_name": "classify", "context": [1], "examples": [{}]},
     "Example must be JSON object but got JSON Array"),
    ({"signature_name": "classify", "examples": [{"text": None}]},
     "Feature: text has element with unexpected JSON type: Null"),
    ({"signature_name": "classify", "examples": [{"text": [["nested"]]}]},
     "Feature: text has element with unexpected JSON type: Array"),
    ({"signature_name": "classify", "examples": [{"text": {"not": "b64"}}]},
     "Feature: text has element with unexpected JSON type: Object"),
    ({"signature_name": "classify", "examples": [{"text": ["a", 1]}]},
     "Unexpected element type in feature: text expecting type: bytes"),
    ({"signature_name": "classify", "examples": [{"n": [1, 0.5]}]},
     "Unexpected element type in feature: n expecting type: int64"),
    ({"signature_name": "classify", "examples": [{"n": 2**63}]},
     "Feature: n has uint64_t element. Only int64_t is supported."),
    ({"signature_name": "classify", "examples": [{"text": {"b64": "***"}}]},
     "Unable to base64 decode"),
    ({"signature_name": "classify", "examples": [{"text": "a"}] * (MAX_INSTANCES + 1)},
     f"at most {MAX_INSTANCES}"),
    # The model's own parser refuses a bytes feature given as numbers: TF's message.
    ({"signature_name": "classify", "examples": [{"text": 3}]},
     "Key: text, Index: 0.  Data types don't match. Data type: int64 but expected type: string"),
]


@pytest.mark.parametrize("body, fragment", BAD_BODIES)
def test_malformed_classify_requests_get_400_with_the_reason(running, body, fragment):
    status, answer = classify(running, body)
    assert status == 400, answer
    assert fragment in answer["error"], answer


def test_grpc_errors_say_what_was_wrong(stub):
    empty = _request([])
    cases = [(empty, "Input is empty."),
             (_request([b"a"], signature="serving_default"),
              "No classification inputs found in SignatureDef")]
    for request, fragment in cases:
        with pytest.raises(grpc.RpcError) as raised:
            stub.Classify(request, timeout=30)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert fragment in raised.value.details()


def test_classify_warmup_records_are_replayed_and_bad_ones_fail_the_load(tmp_path):
    saved = tiny_models.save_tiny_classifier(str(tmp_path / "saved"))
    version = tiny_models.install_version(saved, str(tmp_path / "cls"), 1)
    tiny_models.write_classify_warmup(version, ["x"], signature_name="classify_as_predict")
    with _serve(str(tmp_path / "cls"), method_name_check=True) as strict:
        def ended():
            status, body = http("GET", strict.rest_url + "/v1/models/cls")
            rows = body["model_version_status"] if status == 200 else []
            return rows and rows[0]["state"] == "END" and rows[0]

        row = wait_until(ended)
    assert row["status"]["error_code"] == "INVALID_ARGUMENT"
    assert PREDICT_METHOD_MESSAGE in row["status"]["error_message"]


def test_concurrent_classify_requests_share_batches_and_each_gets_its_rows(classifier_base):
    batching = config_lib.BatchingOptions(max_batch_size=8, batch_timeout_micros=200_000,
                                          num_batch_threads=1)
    texts = ["a?", "b!", "c", "d?", "e!", "f"]
    with _serve(classifier_base, batching=batching) as batched:
        with concurrent.futures.ThreadPoolExecutor(len(texts)) as pool:
            answers = list(pool.map(lambda text: classify(batched, {
                "signature_name": "classify", "examples": [{"text": text}]}), texts))
        _, metrics = http("GET", batched.rest_url + "/monitoring/prometheus/metrics")
    kinds = {"?": "question", "!": "exclamation"}
    assert answers == [(200, {"results": [_row(kinds.get(t[-1], "statement"))]}) for t in texts]
    batch_count = re.search(
        r"^:tensorflow:serving:batching_session:processed_batch_size_count\S* (\S+)$",
        metrics, re.MULTILINE)
    assert batch_count and float(batch_count.group(1)) < len(texts), metrics[-2000:]
