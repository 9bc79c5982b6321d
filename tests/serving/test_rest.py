"""REST API over a real socket: every endpoint in TF Serving's format."""

import base64
import http.client as http_client
import json
import re

import pytest

from serving_helpers import http
from serving_helpers import MAX_BODY
from serving_helpers import MAX_INSTANCES


@pytest.fixture
def running(api_server):
    return api_server


def url(running, path):
    return running.rest_url + path


def test_status_lists_every_version_as_available(running):
    status, body = http("GET", url(running, "/v1/models/tiny"))
    assert status == 200
    assert body == {"model_version_status": [
        {"version": "2", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}},
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}},
    ]}


@pytest.mark.parametrize("path, version", [
    ("/v1/models/tiny/versions/1", "1"), ("/v1/models/tiny/labels/canary", "2"),
    ("/V1/Models/tiny/Versions/2", "2"), ("/v1/models/other", "7")])
def test_status_of_one_version_or_label(running, path, version):
    status, body = http("GET", url(running, path))
    assert status == 200, body
    assert [v["version"] for v in body["model_version_status"]] == [version]


def test_metadata_has_tf_serving_shape(running):
    status, body = http("GET", url(running, "/v1/models/tiny/versions/1/metadata"))
    assert status == 200
    assert body["model_spec"] == {"name": "tiny", "signature_name": "", "version": "1"}
    signatures = body["metadata"]["signature_def"]["signature_def"]
    default = signatures["serving_default"]
    assert default["method_name"] == "tensorflow/serving/predict"
    text = default["inputs"]["text"]
    assert text["dtype"] == "DT_STRING"
    assert text["tensor_shape"] == {"dim": [{"size": "-1", "name": ""}], "unknown_rank": False}
    assert text["name"] == "serving_default_text:0"
    assert set(default["outputs"]) == {"translation", "score", "raw_bytes", "version"}
    assert {"pair", "call_count", "slow"} <= set(signatures)


def test_predict_row_format_answers_with_latest_version(running):
    status, body = http("POST", url(running, "/v1/models/tiny:predict"),
                        {"instances": ["hello", "wörld"]})
    assert status == 200, body
    assert body == {"predictions": [
        {"translation": "HELLO v2", "score": 2.5, "version": 2,
         "raw_bytes": {"b64": base64.b64encode(b"hello").decode()}},
        {"translation": "WöRLD v2", "score": 3.0, "version": 2,
         "raw_bytes": {"b64": base64.b64encode("wörld".encode()).decode()}},
    ]}


def test_predict_columnar_format_with_b64_input(running):
    status, body = http("POST", url(running, "/v1/models/tiny/versions/1:predict"),
                        {"inputs": {"text": [{"b64": base64.b64encode(b"abc").decode()}, "de"]}})
    assert status == 200, body
    assert body == {"outputs": {"translation": ["ABC", "DE"], "score": [1.5, 1.0],
                                "version": [1, 1],
                                "raw_bytes": [{"b64": "YWJj"}, {"b64": "ZGU="}]}}


@pytest.mark.parametrize("path, version", [
    ("/v1/models/tiny/versions/1:predict", 1), ("/v1/models/tiny/labels/stable:predict", 1),
    ("/v1/models/tiny/labels/canary:predict", 2), ("/v1/models/other/versions/7:predict", 1)])
def test_version_and_label_in_url_choose_the_version(running, path, version):
    status, body = http("POST", url(running, path), {"instances": ["x"]})
    assert status == 200, body
    assert body["predictions"][0]["version"] == version


def test_predict_other_signature_with_named_rows_and_single_output(running):
    status, body = http("POST", url(running, "/v1/models/tiny:predict"), {
        "signature_name": "pair",
        "instances": [{"a": "x", "b": [1, 2]}, {"a": "y", "b": [3, 4]}]})
    assert status == 200, body
    assert body == {"predictions": ["x:3", "y:7"]}
    status, body = http("POST", url(running, "/v1/models/tiny:predict"), {
        "signature_name": "pair", "inputs": {"a": ["x"], "b": [[5, 5]]}})
    assert (status, body) == (200, {"outputs": ["x:10"]})


def test_classify_on_a_signature_without_a_classifier_shape_says_why(running):
    # TF Serving without --enable_signature_method_name_check checks the shape only.
    status, body = http("POST", url(running, "/v1/models/tiny:classify"),
                        {"examples": [{"x": 1}]})
    assert (status, body) == (400, {"error": "Expected one or two output Tensors, found 4"})


def test_regress_answers_as_for_a_model_without_regression_signatures(running):
    status, body = http("POST", url(running, "/v1/models/tiny:regress"),
                        {"examples": [{"x": 1}]})
    assert status == 400
    assert body["error"] == ("Expected regression signature method_name to be "
                             "tensorflow/serving/regress. Was: tensorflow/serving/predict")


def test_static_index_is_served_at_root(running):
    assert http("GET", url(running, "/")) == (200, "<html>translate page</html>")


BAD_REQUESTS = [
    # (method, path, body, expected status, fragment of the error message)
    ("POST", "/v1/models/tiny:predict", b"", 400, "The document is empty"),
    ("POST", "/v1/models/tiny:predict", b"instances = [1, 2]", 400, "JSON Parse error"),
    ("POST", "/v1/models/tiny:predict", b'{"instances": ["a"', 400, "JSON Parse error"),
    ("POST", "/v1/models/tiny:predict", b"[1, 2]", 400, "Is not object"),
    ("POST", "/v1/models/tiny:predict", b'{"instances": ["\xff\xfe"]}', 400, "Invalid encoding"),
    ("POST", "/v1/models/tiny:predict", {"instances": ["\ud800"]}, 400, "not valid UTF-8"),
    ("POST", "/v1/models/tiny:predict", {"instances": []}, 400, "No values in 'instances'"),
    ("POST", "/v1/models/tiny:predict", {"instances": "abc"}, 400, "to be an list/array"),
    ("POST", "/v1/models/tiny:predict", {"instances": [1, 2]}, 400,
     "is not of expected type: string"),
    ("POST", "/v1/models/tiny:predict", {"instances": [["a"], "b"]}, 400, "Expecting shape"),
    ("POST", "/v1/models/tiny:predict", {"inputs": {"text": [["a"]]}}, 400,
     "but signature 'serving_default' expects [-1]"),
    ("POST", "/v1/models/tiny:predict", {"inputs": {"txt": ["a"]}}, 400,
     "Missing named input: text"),
    ("POST", "/v1/models/tiny:predict", {"instances": [{"b64": "%%%"}]}, 400,
     "Unable to base64 decode"),
    ("POST", "/v1/models/tiny:predict", {"inputs": {"text": [{"b64": 1}]}}, 400,
     "not formatted correctly for base64"),
    ("POST", "/v1/models/tiny:predict", {"instances": ["a"], "inputs": ["a"]}, 400,
     "expecting only one of"),
    ("POST", "/v1/models/tiny:predict", {"signature_name": 3, "instances": ["a"]}, 400,
     "'signature_name' key must be a string value"),
    ("POST", "/v1/models/tiny:predict", {"signature_name": "nope", "instances": ["a"]}, 400,
     'Serving signature name: "nope" not found in signature def'),
    ("POST", "/v1/models/tiny:predict", {"signature_name": "pair", "instances": ["a"]}, 400,
     "instances is a plain list"),
    ("POST", "/v1/models/tiny:predict", {"signature_name": "pair",
                                         "instances": [{"a": "x", "b": [1.5, 2]}]}, 400,
     "is not of expected type: int32"),
    ("POST", "/v1/models/tiny:predict", {"signature_name": "pair",
                                         "inputs": {"a": ["x"], "b": [[2**40, 1]]}}, 400,
     "is not of expected type: int32"),
    ("POST", "/v1/models/tiny:predict", {"signature_name": "pair",
                                         "inputs": {"a": ["x", "y"], "b": [[1, 1]]}}, 400,
     "Input shapes do not match"),
    ("POST", "/v1/models/tiny:predict", {"nothing": 1}, 400,
     "Missing 'inputs' or 'instances' key"),
    ("POST", "/v1/models/tiny:predict", {"instances": ["a"] * (MAX_INSTANCES + 1)}, 400,
     "Too many instances"),
    ("POST", "/v1/models/tiny:predict", {"instances": ["a" * (MAX_BODY + 10)]}, 413,
     "exceeds the limit"),
    ("POST", "/v1/models/nope:predict", {"instances": ["a"]}, 404,
     "Servable not found for request: Latest(nope)"),
    ("POST", "/v1/models/tiny/versions/9:predict", {"instances": ["a"]}, 404,
     "Servable not found for request: Specific(tiny, 9)"),
    ("POST", "/v1/models/tiny/labels/nope:predict", {"instances": ["a"]}, 400,
     "Unrecognized servable version label: nope"),
    ("POST", "/v1/models/ti%20ny:predict", {"instances": ["a"]}, 400, "not a plain identifier"),
    ("POST", "/v1/models/tiny/versions/99999999999999999999:predict", {"instances": ["a"]}, 400,
     "Failed to convert version"),
    ("GET", "/v1/models/nope", None, 404, "Could not find any versions of model nope"),
    ("GET", "/v1/models/tiny/versions/5", None, 404, "Could not find version 5 of model tiny"),
    ("GET", "/v1/models/tiny/versions/5/metadata", None, 404, "Specific(tiny, 5)"),
    ("GET", "/v1/models", None, 400, "Missing model name"),
    ("GET", "/v1/models/tiny:predict", None, 400, "Malformed request: GET"),
    ("POST", "/v1/models/tiny/metadata", b"{}", 400, "Malformed request: POST"),
    ("POST", "/v1/models/tiny:classify", {"instances": ["a"]}, 400,
     "key 'examples' is expected"),
    ("GET", "/nothing/here", None, 404, "Not found"),
    ("POST", "/v1/models/tiny:predict", b"[" * 30000, 400, "nested too deeply"),
    ("POST", "/v1/models/tiny:predict",
     b'{"instances": ' + b"[" * 900 + b'"a"' + b"]" * 900 + b"}", 400, "nested too deeply"),
    ("POST", "/v1/models/tiny:predict",
     b'{"inputs": {"text": ' + b"[" * 900 + b"1" + b"]" * 900 + b"}}", 400, "nested too deeply"),
]


def test_bad_requests_get_4xx_json_errors_and_server_keeps_serving(running):
    for method, path, body, expected_status, fragment in BAD_REQUESTS:
        status, answer = http(method, url(running, path), body)
        assert status == expected_status, (path, body, answer)
        assert isinstance(answer, dict) and fragment in answer["error"], (path, body, answer)
    status, answer = http("POST", url(running, "/v1/models/tiny:predict"), {"instances": ["ok"]})
    assert status == 200 and answer["predictions"][0]["translation"] == "OK v2"


def _metric(text, name, **labels):
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    match = re.search(rf"^{re.escape(name)}{{{re.escape(wanted)}}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_metrics_count_requests_by_status(running):
    _, before = http("GET", url(running, "/monitoring/prometheus/metrics"))
    for _ in range(3):
        http("POST", url(running, "/v1/models/other:predict"), {"instances": ["a"]})
    http("POST", url(running, "/v1/models/other:predict"), {"instances": [1]})
    _, after = http("GET", url(running, "/monitoring/prometheus/metrics"))
    count = ":tensorflow:serving:request_count"
    assert _metric(after, count, model_name="other", status="OK") - \
        _metric(before, count, model_name="other", status="OK") == 3
    assert _metric(after, count, model_name="other", status="INVALID_ARGUMENT") - \
        _metric(before, count, model_name="other", status="INVALID_ARGUMENT") == 1
    latency = ":tensorflow:serving:request_latency_count"
    assert _metric(after, latency, model_name="other", API="predict", entrypoint="REST") - \
        _metric(before, latency, model_name="other", API="predict", entrypoint="REST") == 4
    assert "# TYPE :tensorflow:serving:request_latency histogram" in after


def test_response_floats_are_written_as_float32_text(running):
    status, body = http("POST", url(running, "/v1/models/tiny:predict"),
                        {"inputs": {"text": ["abc"]}})
    assert status == 200
    assert json.dumps(body["outputs"]["score"]) == "[1.5]"


def test_chunked_body_over_the_limit_is_refused(running):
    port = int(running.rest_url.rsplit(":", 1)[1])
    connection = http_client.HTTPConnection("127.0.0.1", port, timeout=30)
    chunks = (b'{"instances": ["' + b"a" * 8192 for _ in range(MAX_BODY // 8192 + 2))
    connection.request("POST", "/v1/models/tiny:predict", body=chunks, encode_chunked=True,
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 413 and "exceeds the limit" in answer["error"]
    status, _ = http("POST", url(running, "/v1/models/tiny:predict"), {"instances": ["ok"]})
    assert status == 200
