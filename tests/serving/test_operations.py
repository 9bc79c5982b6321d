"""The server under attack and under operations (issue 16): no stalls, deadlines
that stop work, shutdown, load retries, hang-ups, odd versions, idle connections,
garbage gRPC bytes."""

import json
import logging
import shutil
import socket
import threading
import time

import grpc
import numpy as np
import pytest

from serving_helpers import http
from serving_helpers import wait_until
import tiny_models
from keras_transformer.serving import batching
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import errors
from keras_transformer.serving import manager
from keras_transformer.serving import server as server_lib

METRICS = "/monitoring/prometheus/metrics"


def start_server(base_path, **kwargs):
    kwargs.setdefault("poll_seconds", 0)
    options = server_lib.ServerOptions.from_model(
        "tiny", base_path, port=0, rest_api_port=0, **kwargs)
    return server_lib.ServerThread(options).start()


def request_count(running, status, model="tiny"):
    _, text = http("GET", running.rest_url + METRICS)
    line = f':tensorflow:serving:request_count{{model_name="{model}",status="{status}"}} '
    for row in text.splitlines():
        if row.startswith(line):
            return float(row[len(line):])
    return 0.0


# ------------------------------------------------------------------ no stalls


def test_status_answers_fast_while_a_3mb_request_is_parsed(one_version):
    running = start_server(one_version)  # Default limits: 4 MiB bodies, 1000 rows.
    try:
        big = json.dumps({"inputs": {"text": ["abcdefghi"] * 300000}}).encode()
        assert 3_000_000 < len(big) < 4 * 1024 * 1024
        answer = {}

        def send_big():
            answer["big"] = http("POST", running.rest_url + "/v1/models/tiny:predict", big,
                                 timeout=60)

        latencies = []
        sender = threading.Thread(target=send_big)
        sender.start()
        while sender.is_alive() or not latencies:
            started = time.monotonic()
            status, _ = http("GET", running.rest_url + "/v1/models/tiny", timeout=10)
            latencies.append(time.monotonic() - started)
            assert status == 200
        sender.join()
        status, body = answer["big"]
        assert status == 400 and "300000 rows" in body["error"] and "at most 1000" in body["error"]
        assert max(latencies) < 0.5, latencies
        # An int input is refused before any of its 600,000 values is converted.
        started = time.monotonic()
        status, body = http("POST", running.rest_url + "/v1/models/tiny:predict",
                            {"signature_name": "pair",
                             "inputs": {"a": ["x"] * 300000, "b": [[1, 2]] * 300000}})
        assert status == 400 and "rows" in body["error"]
        assert time.monotonic() - started < 5
    finally:
        running.stop()


def test_values_limit_is_checked_before_converting(one_version):
    limits = config_lib.ServingLimits(max_elements=10)
    running = start_server(one_version, limits=limits)
    try:
        status, body = http("POST", running.rest_url + "/v1/models/tiny:predict",
                            {"signature_name": "pair", "instances": [{"a": "x", "b": [1, 2]}] * 6})
        assert status == 400 and "12 values" in body["error"] and "at most 10" in body["error"]
        status, _ = http("POST", running.rest_url + "/v1/models/tiny:predict",
                         {"signature_name": "pair", "inputs": {"a": ["x"], "b": [[1, 2]]}})
        assert status == 200
    finally:
        running.stop()


# ------------------------------------------------------------------ deadlines


def call_count(running):
    status, body = http("POST", running.rest_url + "/v1/models/tiny:predict",
                        {"signature_name": "call_count", "inputs": 0})
    assert status == 200, body
    return body["outputs"]


def test_request_whose_deadline_passed_in_the_queue_never_runs(one_version):
    # One model thread: the translate request waits behind a slow call and its
    # deadline passes before a thread is free.
    limits = config_lib.ServingLimits(request_timeout_s=0.5)
    running = start_server(one_version, limits=limits, num_model_threads=1)
    try:
        wait_until(lambda: call_count(running) is not None)
        before = call_count(running)
        slow = threading.Thread(target=http, args=(
            "POST", running.rest_url + "/v1/models/tiny:predict",
            {"signature_name": "slow", "inputs": 3_000_000}), kwargs={"timeout": 60})
        slow.start()
        time.sleep(0.1)
        status, body = http("POST", running.rest_url + "/v1/models/tiny:predict",
                            {"instances": ["never"]})
        assert status == 504, body
        slow.join(60)
        wait_until(lambda: running.server.core.calls_in_flight() == 0, timeout=120)
        assert call_count(running) == before  # The translate signature never ran.
    finally:
        running.stop()


def test_batch_scheduler_drops_requests_past_their_deadline():
    release = threading.Event()
    calls = []

    def run_batch(inputs, should_stop):
        calls.append(inputs["x"].shape[0])
        release.wait(10)
        return {"y": inputs["x"]}

    scheduler = batching.BatchScheduler(
        run_batch, config_lib.BatchingOptions(max_batch_size=4, num_batch_threads=1))
    try:
        first = scheduler.submit({"x": np.zeros((1, 1))})
        wait_until(lambda: calls)  # The only batch thread is busy with `first`.
        late = scheduler.submit({"x": np.zeros((2, 1))}, deadline=time.monotonic() + 0.05)
        time.sleep(0.2)
        release.set()
        assert first.result(10)["y"].shape == (1, 1)
        with pytest.raises(errors.ServingError) as raised:
            late.result(10)
        assert raised.value.code == "DEADLINE_EXCEEDED"
        assert calls == [1]
    finally:
        scheduler.stop()


# -------------------------------------------------------------- load retries


class _FlakyLoader:
    """Fails the first `failures` loads of the same, unchanged folder."""

    def __init__(self, failures):
        self.failures = failures
        self.calls = 0

    def __call__(self, path):
        self.calls += 1
        if self.calls <= self.failures:
            raise errors.ServingError("NOT_FOUND", "Could not find SavedModel .pb")
        return object()


def _model(base, loader, retries, interval_s):
    model_config = config_lib.single_model_config("tiny", base).model_config_list.config[0]
    return manager.ModelVersions(model_config, loader,
                                 retry=manager.LoadRetryPolicy(retries, interval_s))


def test_failed_load_is_retried_after_the_interval_up_to_the_limit(tmp_path):
    (tmp_path / "1").mkdir()
    loader = _FlakyLoader(failures=2)
    model = _model(str(tmp_path), loader, retries=5, interval_s=0.05)
    model.poll()
    assert model.status()[0].state is manager.State.END and loader.calls == 1
    model.poll()
    assert loader.calls == 1  # Not before the interval.
    for _ in range(2):
        time.sleep(0.06)
        model.poll()
    assert loader.calls == 3 and model.status()[0].state is manager.State.AVAILABLE

    limited = _model(str(tmp_path), _FlakyLoader(failures=100), retries=1, interval_s=0)
    for _ in range(5):
        limited.poll()
    assert limited._load_servable.calls == 2  # The load and one retry.
    assert limited.status()[0].error.code == "NOT_FOUND"


def test_version_copied_in_two_steps_is_served_without_restart(saved_versions, tmp_path):
    base = tmp_path / "tiny"
    version = base / "1"
    source = saved_versions[1]
    # Step 1: the folder appears with its variables only (cp -r still writing).
    shutil.copytree(f"{source}/variables", version / "variables")
    running = start_server(str(base), poll_seconds=0.1, max_num_load_retries=1000,
                           load_retry_interval_s=0.2)
    try:
        _, body = http("GET", running.rest_url + "/v1/models/tiny")
        row = body["model_version_status"][0]
        assert row["state"] == "END" and row["status"]["error_code"] == "NOT_FOUND"
        # Step 2: the copy completes.
        shutil.copytree(source, version, dirs_exist_ok=True)
        wait_until(lambda: http("GET", running.rest_url + "/v1/models/tiny")[1]
                   ["model_version_status"][0]["state"] == "AVAILABLE", timeout=30)
        status, body = http("POST", running.rest_url + "/v1/models/tiny:predict",
                            {"instances": ["ok"]})
        assert status == 200 and body["predictions"][0]["translation"] == "OK"
    finally:
        running.stop()


# --------------------------------------------------------- clients that leave


def test_client_hanging_up_mid_body_counts_as_cancelled_without_traceback(api_server, caplog):
    host, port = api_server.rest_url[len("http://"):].rsplit(":", 1)
    cancelled, internal = request_count(api_server, "CANCELLED"), request_count(
        api_server, "INTERNAL")
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            with socket.create_connection((host, int(port)), timeout=10) as connection:
                connection.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: x\r\n"
                                   b"Content-Type: application/json\r\n"
                                   b"Content-Length: 1000\r\n\r\n{\"instances\": [")
                time.sleep(0.05)
        wait_until(lambda: request_count(api_server, "CANCELLED") >= cancelled + 3)
    assert request_count(api_server, "INTERNAL") == internal
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    assert all("\n" not in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------ small ones


@pytest.mark.parametrize("path", [
    "/v1/models/tiny/versions/" + "1" * 5000,
    "/v1/models/tiny/versions/%D9%A1",  # Arabic-Indic digit one.
    "/v1/models/tiny/versions/%EF%BC%91",  # Fullwidth digit one.
])
def test_odd_versions_are_refused_like_tf_serving(api_server, path):
    for method, suffix, body in (("GET", "", None), ("POST", ":predict", {"instances": ["a"]})):
        status, answer = http(method, api_server.rest_url + path + suffix, body)
        assert status in (400, 404), (status, answer)
        assert "error" in answer and len(answer["error"]) < 300


def _closed_within(host, port, first_bytes, seconds):
    with socket.create_connection((host, port), timeout=seconds + 5) as connection:
        if first_bytes:
            connection.sendall(first_bytes)
        started = time.monotonic()
        while connection.recv(4096):  # Anything until the server closes.
            pass
        return time.monotonic() - started


def test_idle_and_unfinished_header_connections_are_closed(one_version):
    limits = config_lib.ServingLimits(idle_timeout_s=0.5)
    running = start_server(one_version, limits=limits)
    try:
        host, port = running.rest_url[len("http://"):].rsplit(":", 1)
        assert _closed_within(host, int(port), b"", 0.5) < 3
        assert _closed_within(host, int(port), b"GET /v1/models/tiny HTTP/1.1\r\nHo", 0.5) < 3
        assert http("GET", running.rest_url + "/v1/models/tiny")[0] == 200
    finally:
        running.stop()


@pytest.mark.parametrize("method", [
    "/tensorflow.serving.PredictionService/Predict",
    "/tensorflow.serving.ModelService/GetModelStatus"])
def test_grpc_garbage_bytes_are_invalid_argument(api_server, method):
    with grpc.insecure_channel(api_server.grpc_target) as channel:
        call = channel.unary_unary(method)  # Bytes in, bytes out.
        with pytest.raises(grpc.RpcError) as raised:
            call(b"\xff\xff\xff\xff\xff", timeout=30)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Could not parse the request" in raised.value.details()


# ------------------------------------------- TF Serving flags that take effect


def test_warmup_iterations_replay_each_record_that_many_times(saved_versions, tmp_path):
    staging, base = str(tmp_path / "staging"), str(tmp_path / "tiny")
    tiny_models.install_version(saved_versions[1], staging, 1)
    tiny_models.write_warmup(f"{staging}/1", [[b"a"], [b"b"]])
    tiny_models.install_version(f"{staging}/1", base, 1)
    running = start_server(base, warmup_iterations=3)
    try:
        assert call_count(running) == 2 * 3
    finally:
        running.stop()


def test_model_config_file_is_reread_and_applied(saved_versions, tmp_path):
    for name in ("tiny", "other"):
        tiny_models.install_version(saved_versions[1], str(tmp_path / name), 1)
    config_file = tmp_path / "models.config"

    def write(names):
        entries = "".join(f"config {{ name: '{n}' base_path: '{tmp_path / n}' }} "
                          for n in names)
        config_file.write_text(f"model_config_list {{ {entries}}}")

    write(["tiny"])
    options = server_lib.ServerOptions(
        model_config=config_lib.read_model_config_file(str(config_file)), port=0,
        rest_api_port=0, poll_seconds=0, model_config_file=str(config_file),
        model_config_poll_seconds=0.2)
    with server_lib.ServerThread(options) as running:
        assert http("GET", running.rest_url + "/v1/models/other")[0] == 404
        write(["tiny", "other"])
        wait_until(lambda: http("GET", running.rest_url + "/v1/models/other")[0] == 200)
        config_file.write_text("model_config_list { config { name: '../bad' } }")
        time.sleep(0.5)  # A broken edit keeps the models being served.
        assert http("GET", running.rest_url + "/v1/models/other")[0] == 200


def test_num_load_threads_loads_models_in_parallel(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name / "1").mkdir(parents=True)
    config = config_lib.parse_model_config(
        f"model_config_list {{ config {{ name: 'a' base_path: '{tmp_path / 'a'}' }} "
        f"config {{ name: 'b' base_path: '{tmp_path / 'b'}' }} }}")
    both_loading = threading.Barrier(2, timeout=5)

    def load(path):  # Succeeds only if the other model's load runs at the same time.
        both_loading.wait()
        return object()

    parallel = manager.ModelRegistry(config, load, poll_seconds=0, num_load_threads=2)
    parallel.poll_once()
    assert [parallel.status(n)[0].state for n in ("a", "b")] == [manager.State.AVAILABLE] * 2

    both_loading.reset()
    sequential = manager.ModelRegistry(
        config, load, poll_seconds=0, retry=manager.LoadRetryPolicy(0, 0), num_load_threads=1)
    started = time.monotonic()
    sequential.poll_once()  # The first load waits for a partner that never comes.
    assert time.monotonic() - started >= 4
    assert sequential.status("a")[0].state is manager.State.END


def test_body_that_trickles_in_past_the_deadline_is_cut_off(one_version):
    limits = config_lib.ServingLimits(request_timeout_s=0.5)
    running = start_server(one_version, limits=limits)
    try:
        host, port = running.rest_url[len("http://"):].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            connection.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: x\r\n"
                               b"Content-Length: 100\r\n\r\n{")
            started = time.monotonic()
            answer = connection.recv(4096)
            assert time.monotonic() - started < 5
        assert answer.startswith(b"HTTP/1.1 504") and b"before the deadline" in answer
    finally:
        running.stop()
