"""Small requests that cost a lot (issue 56): byte budgets, deadlines that stop the
work, one model never starving another, bounded responses, generation arguments at
their extremes, JSON errors for unparsable HTTP, warmup for every signature."""

import json
import logging
import re
import socket
import threading
import time
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from serving_helpers import http
from serving_helpers import wait_until
import tiny_models
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import server as server_lib

ROW_LOOPS = 40_000  # One `work` row: about 0.3 s on a 2-core CPU.


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """{"work": base path, "tiny": base path, "cls": base path}, version 1 each."""
    root = tmp_path_factory.mktemp("abuse")
    saved = {
        "work": tiny_models.save_work_rows_model(str(root / "saved-work")),
        "tiny": tiny_models.save_tiny_model(str(root / "saved-tiny"), 1),
        "cls": tiny_models.save_tiny_classifier(str(root / "saved-cls")),
    }
    return {name: tiny_models.install_version(path, str(root / name), 1)[:-2]
            for name, path in saved.items()}


def serve(bases, limits=None, **options):
    entries = "".join(f"config {{ name: '{name}' base_path: '{path}' }} "
                      for name, path in bases.items())
    model_config = config_lib.parse_model_config(f"model_config_list {{ {entries}}}")
    return server_lib.ServerThread(server_lib.ServerOptions(
        model_config=model_config, port=0, rest_api_port=0, poll_seconds=0, web_page=False,
        limits=limits or config_lib.ServingLimits(), **options))


def predict(running, model, document, timeout=60):
    return http("POST", f"{running.rest_url}/v1/models/{model}:predict", document,
                timeout=timeout)


def rows_done(running):
    status, body = predict(running, "work", {"signature_name": "done", "inputs": 0})
    assert status == 200, body
    return body["outputs"]


# ---------------------------------------------------------- a huge JSON integer


def test_an_integer_of_thousands_of_digits_is_a_parse_error_not_a_500(api_server):
    for body in ('{"instances": [' + "7" * 5000 + "]}",
                 '{"signature_name": "pair", "inputs": {"a": ["x"], "b": [[1, -' + "9" * 4400
                 + "]]}}"):
        status, answer = predict(api_server, "tiny", body)
        assert status == 400, answer
        assert answer["error"].startswith("JSON Parse error: Number too big")
        assert len(answer["error"]) < 200


# ------------------------------------------------- bytes, not rows: the context


def test_classify_context_is_counted_once_per_example_before_it_is_copied(bases):
    limits = config_lib.ServingLimits(max_tensor_bytes=1_000_000)
    context = {"note": "x" * 20_000}
    with serve({"cls": bases["cls"]}, limits) as running:
        url = running.rest_url + "/v1/models/cls:classify"
        # 100 examples x 20 KB of context: 2 MB once copied, though the body is 21 KB.
        status, body = http("POST", url, {"signature_name": "classify", "context": context,
                                          "examples": [{"text": "why?"}] * 100})
        assert status == 413, body
        assert "--max_request_tensor_bytes" in body["error"]
        assert "context copied into each" in body["error"] and "1000000" in body["error"]
        status, body = http("POST", url, {"signature_name": "classify", "context": context,
                                          "examples": [{"text": "why?"}] * 10})
        assert status == 200 and len(body["results"]) == 10


def test_a_broadcast_tensor_proto_is_refused_before_it_is_allocated():
    from keras_transformer.serving import errors
    from keras_transformer.serving import tensors

    proto = tf.make_tensor_proto([b"y" * 1000], dtype=tf.string)
    proto.tensor_shape.dim[0].size = 100_000  # One value, repeated: 100 MB once decoded.
    with pytest.raises(errors.ServingError) as raised:
        tensors.tensor_from_proto(proto, max_bytes=10_000_000)
    assert raised.value.code == "RESOURCE_EXHAUSTED" and "100000000 bytes" in raised.value.message


# -------------------------------------- deadlines that stop the work, isolation


def test_abandoned_work_stops_within_a_slice_and_never_starves_another_model(bases):
    limits = config_lib.ServingLimits(request_timeout_s=1.0, max_rows_per_call=1)
    with serve(bases, limits, num_model_threads=1) as running:
        wait_until(lambda: rows_done(running) == 0)
        answers = []
        abuse = threading.Thread(target=lambda: answers.append(predict(
            running, "work", {"signature_name": "work", "inputs": [ROW_LOOPS] * 60})))
        started = time.monotonic()
        abuse.start()
        time.sleep(0.2)
        # The other model answers while "work" is busy: it has threads of its own.
        other_started = time.monotonic()
        status, body = predict(running, "tiny", {"instances": ["hi"]})
        assert status == 200 and body["predictions"][0]["translation"] == "HI"
        assert time.monotonic() - other_started < 1.0
        abuse.join(30)
        assert answers[0][0] == 504 and time.monotonic() - started < 5
        # The call stops at its next slice: rows stop being counted within one slice.
        wait_until(lambda: running.server.core.calls_in_flight() == 0, timeout=10)
        done = rows_done(running)
        time.sleep(1.0)
        assert rows_done(running) == done < 60


def _grpc_work_request(rows):
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = "work", "work"
    request.inputs["n"].CopyFrom(tf.make_tensor_proto([ROW_LOOPS] * rows, dtype=tf.int32))
    return request


def _grpc_predict(running, request, timeout):
    """The gRPC status code name of one Predict call."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc.insecure_channel(running.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            stub.Predict(request, timeout=timeout)
        except grpc.RpcError as error:
            return error.code().name
    return "OK"


def _send_and_leave_open(running, model, document):
    """Sends a REST predict on a raw socket and returns the open socket."""
    host, port = running.rest_url[len("http://"):].rsplit(":", 1)
    body = json.dumps(document).encode()
    connection = socket.create_connection((host, int(port)), timeout=10)
    connection.sendall(f"POST /v1/models/{model}:predict HTTP/1.1\r\nHost: x\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return connection


# Slices sized by time: a work row (about 0.3 s) is over this target, so every
# slice holds one row although --max_rows_per_model_call allows 8.
ONE_ROW_SLICES = config_lib.ServingLimits(slice_seconds=0.01)


def test_a_grpc_client_deadline_stops_the_work_within_one_slice(bases):
    with serve({"work": bases["work"]}, ONE_ROW_SLICES) as running:
        assert _grpc_predict(running, _grpc_work_request(60), 1.0) == "DEADLINE_EXCEEDED"
        at_deadline = rows_done(running)
        wait_until(lambda: running.server.core.calls_in_flight() == 0, timeout=20)
        # At most the one-row slice running at the deadline (and one the server
        # started as it saw the deadline a moment after the client) ends after it.
        assert rows_done(running) - at_deadline <= 2, (at_deadline, rows_done(running))


def test_a_rest_client_that_disconnects_stops_the_work(bases):
    with serve({"work": bases["work"]}, ONE_ROW_SLICES) as running:
        connection = _send_and_leave_open(running, "work", {"signature_name": "work",
                                                            "inputs": [ROW_LOOPS] * 60})
        wait_until(lambda: rows_done(running) >= 1)
        connection.close()  # Long before the 30 s deadline.
        at_close = rows_done(running)
        wait_until(lambda: running.server.core.calls_in_flight() == 0, timeout=20)
        assert rows_done(running) - at_close <= 2, (at_close, rows_done(running))


def test_queued_calls_whose_deadline_passed_or_client_left_never_start(bases):
    with serve({"work": bases["work"]}, ONE_ROW_SLICES, num_model_threads=1) as running:
        core = running.server.core
        answers = []
        # Two slices of one long row (about 1.8 s each) on the model's only thread.
        first = threading.Thread(target=lambda: answers.append(predict(
            running, "work", {"signature_name": "work", "inputs": [6 * ROW_LOOPS] * 2})))
        first.start()
        wait_until(lambda: core.calls_in_flight() == 1)
        # Both wait for a turn while the first call's first slice runs.
        left = _send_and_leave_open(running, "work", {"signature_name": "work",
                                                      "inputs": [ROW_LOOPS] * 5})
        wait_until(lambda: core.calls_in_flight() == 2)
        left.close()
        assert _grpc_predict(running, _grpc_work_request(5), 0.5) == "DEADLINE_EXCEEDED"
        first.join(60)
        assert answers[0][0] == 200, answers
        wait_until(lambda: core.calls_in_flight() == 0)
        assert rows_done(running) == 2  # Only the first call's rows ever ran.


def test_a_one_row_request_never_waits_for_a_many_slice_request_to_end(bases):
    with serve({"work": bases["work"]}, ONE_ROW_SLICES, num_model_threads=1) as running:
        core = running.server.core
        answers = []
        big = threading.Thread(target=lambda: answers.append(predict(
            running, "work", {"signature_name": "work", "inputs": [ROW_LOOPS] * 12})))
        big.start()
        wait_until(lambda: rows_done(running) >= 1)
        status, body = predict(running, "work", {"signature_name": "work",
                                                 "inputs": [ROW_LOOPS]})
        assert status == 200, body
        # The big call takes turns with it on the model's one thread, slice by
        # slice: it is still running (first-in first-out would have finished it).
        assert core.calls_in_flight() == 1 and rows_done(running) < 13
        big.join(60)
        assert answers[0][0] == 200 and len(answers[0][1]["outputs"]) == 12, answers
        assert rows_done(running) == 13


class _PacedSignature:
    """A stand-in signature whose calls cost `per_row` seconds a row and
    `per_byte` a byte of text on a fake clock.

    `latest_pace` is what `Signature.run` would have recorded of its latest
    call; `slices` holds the rows of each call.
    """

    name = "paced"

    def __init__(self, clock, per_row, per_byte=0.0, latest_pace=None):
        self.clock, self.per_row, self.per_byte = clock, per_row, per_byte
        self.latest_pace, self.slices = latest_pace, []

    def row_count(self, inputs):
        return len(inputs["text"])

    def run(self, inputs):
        texts = inputs["text"]
        self.slices.append(len(texts))
        self.clock[0] += self.per_row * len(texts) + self.per_byte * sum(map(len, texts))
        return {"length": np.array([len(text) for text in texts])}


def _run_to_end(*args, **kwargs):
    """Runs `budgets.sliced_call(*args, **kwargs)`'s slices back to back; its outputs."""
    from keras_transformer.serving import budgets

    steps = budgets.sliced_call(*args, **kwargs)
    while True:
        try:
            next(steps)
        except StopIteration as finished:
            return finished.value


def test_slices_are_sized_from_the_time_target(monkeypatch):
    from keras_transformer.serving import budgets
    from keras_transformer.serving import errors

    clock = [0.0]
    monkeypatch.setattr(budgets.time, "monotonic", lambda: clock[0])
    short = {"text": np.array([b"x" * 10] * 10, object)}
    # Unknown pace: one row first; then as many rows as 1 s allows at 0.3 s a row.
    signature = _PacedSignature(clock, 0.3)
    outputs = _run_to_end(signature, short, 8, slice_seconds=1.0)
    assert signature.slices == [1, 3, 3, 3] and outputs["length"].tolist() == [10] * 10
    # The first slice follows the signature's latest pace (capped at max_rows).
    signature = _PacedSignature(clock, 0.3, latest_pace=budgets.Pace(0.1, 10, 100))
    _run_to_end(signature, short, 8, slice_seconds=1.0)
    assert signature.slices == [8, 2]
    # Rows longer than the latest call's are sized by bytes: 1 s at 10 bytes a
    # second (what 10-byte rows took) is one 100-byte row, not ten.
    long = {"text": np.array([b"y" * 100] * 6, object)}
    signature = _PacedSignature(clock, 0.0, 0.003, latest_pace=budgets.Pace(0.1, 1, 10))
    _run_to_end(signature, long, 8, slice_seconds=1.0)
    assert signature.slices == [1, 3, 2]
    # Without a time target, slices of max_rows; a call fitting one slice runs whole.
    signature = _PacedSignature(clock, 0.3)
    _run_to_end(signature, short, 4)
    assert signature.slices == [4, 4, 2]
    signature = _PacedSignature(clock, 0.3, latest_pace=budgets.Pace(0.1, 1, 10))
    _run_to_end(signature, short, 10, slice_seconds=1.0)
    assert signature.slices == [10]
    # should_stop is asked before every slice, the first included.
    asked = []
    signature = _PacedSignature(clock, 0.3)
    with pytest.raises(errors.ServingError, match="stopped after 4 of 10 rows"):
        _run_to_end(signature, short, 8, should_stop=lambda: asked.append(1) or
                           len(asked) > 2, slice_seconds=1.0)
    assert signature.slices == [1, 3]
    with pytest.raises(errors.ServingError, match="before the model call started"):
        _run_to_end(signature, short, 8, should_stop=lambda: True, slice_seconds=1.0)
    assert signature.slices == [1, 3]


# ------------------------------------------------ bounded, interruptible responses


def test_a_response_over_the_limit_is_a_4xx_naming_the_flag(bases):
    limits = config_lib.ServingLimits(max_response_bytes=100_000, max_rows_per_call=2)
    with serve({"work": bases["work"]}, limits) as running:
        status, body = predict(running, "work", {"signature_name": "wide",
                                                 "inputs": [10_000] * 10})
        assert status == 400, body
        assert "--max_response_bytes" in body["error"] and "100000" in body["error"]
        # Stopped at the first slice past the limit (40 KB a row; slices of 1 or 2 rows).
        assert re.search(r"after [34] of its 10 rows", body["error"]), body["error"]
        status, body = predict(running, "work", {"signature_name": "wide",
                                                 "inputs": [1000] * 10})
        assert status == 200 and np.shape(body["outputs"]) == (10, 1000)


def test_status_and_metadata_stay_fast_while_a_large_response_is_encoded(bases):
    with serve({"work": bases["work"]}) as running:
        answer = {}

        def big():  # 16 MB of float32, the default limit's worth: millions of JSON numbers.
            request = urllib.request.Request(
                running.rest_url + "/v1/models/work:predict", method="POST",
                data=json.dumps({"signature_name": "wide", "instances": [500_000] * 8}).encode())
            # Read as bytes: parsing 40 MB here would hold this process's interpreter.
            with urllib.request.urlopen(request, timeout=120) as response:
                answer["big"] = response.status, response.read()

        sender = threading.Thread(target=big)
        latencies = []
        sender.start()
        while sender.is_alive() or not latencies:
            for path in ("/v1/models/work", "/v1/models/work/metadata"):
                started = time.monotonic()
                assert http("GET", running.rest_url + path, timeout=10)[0] == 200
                latencies.append(time.monotonic() - started)
        sender.join()
        status, body = answer["big"][0], json.loads(answer["big"][1])
        assert status == 200 and len(body["predictions"]) == 8
        assert len(body["predictions"][0]) == 500_000
        assert max(latencies) < 0.5, max(latencies)


def test_encoding_the_response_counts_against_the_deadline():
    from keras_transformer.serving import errors
    from keras_transformer.serving import json_tensor

    outputs = {"values": np.ones((64, 100_000), np.float32)}
    with pytest.raises(errors.ServingError) as raised:
        json_tensor.predict_response_bytes(outputs, json_tensor.ROW, time.monotonic() + 0.05)
    assert raised.value.code == "DEADLINE_EXCEEDED"
    small = {"values": np.ones((3, 2), np.float32), "name": np.array([b"a", b"b", b"c"], object)}
    assert json.loads(json_tensor.predict_response_bytes(small, json_tensor.ROW)) == {
        "predictions": [{"values": [1.0, 1.0], "name": "a"}, {"values": [1.0, 1.0], "name": "b"},
                        {"values": [1.0, 1.0], "name": "c"}]}
    assert json.loads(json_tensor.predict_response_bytes(small, json_tensor.COLUMNAR)) == {
        "outputs": {"values": [[1.0, 1.0]] * 3, "name": ["a", "b", "c"]}}


# ------------------------------------------------------- a parse failure says so


def test_bytes_that_are_not_an_example_give_the_parse_error(bases):
    with serve({"cls": bases["cls"]}) as running:
        status, body = predict(running, "cls", {"signature_name": "classify",
                                                "instances": [{"b64": "//6AZ2FyYmFnZQ=="}]})
        assert status == 400, body
        assert "Could not parse example input" in body["error"]
        assert "codec can't decode" not in body["error"]


# ---------------------------------------------- HTTP the parser cannot read


@pytest.mark.parametrize("head", [
    b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
    b"Content-Length: 2\r\n\r\n{}",
    b"GET /v1/models/tiny HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n",
])
def test_unparsable_http_gets_a_json_error_and_one_log_line(api_server, caplog, head):
    host, port = api_server.rest_url[len("http://"):].rsplit(":", 1)
    with caplog.at_level(logging.INFO):
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            connection.sendall(head)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line.split()[1].startswith(b"4"), answer[:200]
    assert b"application/json" in headers.lower()
    assert json.loads(body)["error"].startswith("Malformed HTTP request: ")
    wait_until(lambda: any("Malformed HTTP request" in r.getMessage() for r in caplog.records))
    assert not [r for r in caplog.records if r.exc_info]
    assert all("\n" not in r.getMessage() for r in caplog.records)


# ----------------------------------------------------- warmup on every signature


class _TwoTexts(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def upper(self, text):
        return {"upper": tf.strings.upper(text)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="source"),
                                  tf.TensorSpec([None], tf.string, name="target")])
    def joined(self, source, target):
        return {"joined": tf.strings.join([source, target])}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="n")])
    def numbers(self, n):
        return {"n": n}


def test_warmup_covers_every_signature_and_asks_for_numbers_it_cannot_guess():
    from keras_transformer.export.writer import WarmupRequest
    from keras_transformer.export.writer import warmup_for_every_signature

    module = _TwoTexts()
    signatures = {"serving_default": module.upper.get_concrete_function(),
                  "joined": module.joined.get_concrete_function()}
    given = [WarmupRequest("serving_default", inputs={"text": ["a"]})]
    requests = warmup_for_every_signature(given, signatures, ["a", "b"])
    assert {r.signature_name for r in requests} == {"serving_default", "joined"}
    assert [r.inputs for r in requests if r.signature_name == "joined"] == [
        {"source": ["a"], "target": ["a"]}, {"source": ["b"], "target": ["b"]}]
    signatures["numbers"] = module.numbers.get_concrete_function()
    with pytest.raises(ValueError, match="'numbers' takes numbers"):
        warmup_for_every_signature(given, signatures, ["a"])
    extra = given + [WarmupRequest("numbers", inputs={"n": [1]})]
    assert len(warmup_for_every_signature(extra, signatures, ["a"])) == 3


# ------------------------------------------------------ generation arguments


@pytest.fixture(scope="module")
def language_model():
    """A tiny untrained LM of 50 pieces and 16 positions, and a module around it."""
    import itertools

    import keras
    from keras_transformer.data import read_cmn_eng
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.data.tokenizer import train_sentencepiece
    from keras_transformer.export import LanguageModelModule
    from keras_transformer.models import build_language_model

    texts = [p.target for p in itertools.islice(read_cmn_eng(), 0, 8000, 20)]
    tokenizer = SubwordTokenizer(train_sentencepiece(texts, 120))
    keras.utils.set_random_seed(3)
    model = build_language_model("tiny", vocab_size=tokenizer.vocab_size, max_length=16)
    return model, LanguageModelModule(model, tokenizer, max_new_tokens=4)


def _sample(module, text, max_new_tokens, temperature=0.0, top_k=0, seed=0):
    return module.sample(tf.constant([text]), tf.constant([temperature], tf.float32),
                         tf.constant([top_k], tf.int32), tf.constant([1.0], tf.float32),
                         tf.constant([seed], tf.int64), tf.constant([max_new_tokens], tf.int32))


def test_a_huge_max_new_tokens_never_overflows(language_model):
    from keras_transformer.decoding import Generator

    model, module = language_model
    result = Generator(model).generate([[2, 9, 11]], max_new_tokens=2**31 - 2)
    assert int(result["lengths"][0]) > 0  # Up to the 16 positions, not an empty row.
    with pytest.raises(tf.errors.InvalidArgumentError, match="lower max_new_tokens to at most"):
        _sample(module, "Tom is", 2**31 - 2)


def test_a_prompt_is_never_silently_cut_to_fit_its_new_tokens(language_model):
    _, module = language_model
    text = "Tom is here"
    length = int(module.tokenizer.tokenize(tf.constant([text])).row_lengths()[0])
    allowed = 16 - 1 - length
    assert allowed > 0
    _sample(module, text, allowed)  # Fits exactly.
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _sample(module, text, allowed + 1)
    assert f"lower max_new_tokens to at most {allowed}" in raised.value.message


@pytest.mark.parametrize("temperature", [1e30, float("inf")])
def test_an_infinite_temperature_is_uniform_over_the_top_k_never_a_control_piece(
        language_model, temperature):
    from keras_transformer.constants import BOS_ID
    from keras_transformer.constants import UNK_ID
    from keras_transformer.decoding import Generator

    model, _ = language_model
    prompt = [[BOS_ID, 9, 11]]
    logits = model(tf.constant(prompt), training=False)[0, -1].numpy()
    logits[[0, UNK_ID, BOS_ID]] = -np.inf
    top = set(np.argsort(-logits)[:20].tolist())
    generator = Generator(model)
    first_tokens = set()
    for seed in range(20):
        tokens = generator.generate(prompt, max_new_tokens=6, temperature=temperature,
                                    top_k=20, seed=seed)["tokens"].numpy()[0].tolist()
        assert UNK_ID not in tokens and BOS_ID not in tokens, tokens
        first_tokens.add(tokens[0])
    assert first_tokens <= top and len(first_tokens) > 5  # Spread over the top 20.
