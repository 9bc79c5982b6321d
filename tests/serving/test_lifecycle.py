"""Versions change under a running server: hot swap, broken versions, warmup."""

import os
import threading
import time

import grpc
import pytest
from tensorflow_serving.apis import model_management_pb2
from tensorflow_serving.apis import model_service_pb2_grpc

from serving_helpers import http
from serving_helpers import wait_until
import tiny_models
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import server as server_lib


def start_server(base_path, **kwargs):
    options = server_lib.ServerOptions.from_model(
        "tiny", base_path, port=0, rest_api_port=0, poll_seconds=0.1, **kwargs)
    return server_lib.ServerThread(options).start()


def predict(running, texts=("x",), timeout=30):
    return http("POST", running.rest_url + "/v1/models/tiny:predict",
                {"instances": list(texts)}, timeout=timeout)


def status_rows(running):
    _, body = http("GET", running.rest_url + "/v1/models/tiny")
    return {int(row["version"]): row for row in body["model_version_status"]}


def test_new_version_is_picked_up_with_zero_failed_requests(saved_versions, tmp_path):
    base = str(tmp_path / "tiny")
    tiny_models.install_version(saved_versions[1], base, 1)
    running = start_server(base)
    answers, failures = [], []
    stop = threading.Event()

    def client_loop():
        deadline = time.monotonic() + 30
        for _ in range(3000):  # Bounded in count and in time.
            if stop.is_set() or time.monotonic() > deadline:
                return
            try:
                status, body = predict(running, timeout=10)
            except OSError as error:  # Connection refused/reset counts as a failure.
                failures.append(repr(error))
                continue
            if status != 200:
                failures.append((status, body))
            else:
                answers.append(body["predictions"][0]["version"])

    try:
        clients = [threading.Thread(target=client_loop) for _ in range(2)]
        for thread in clients:
            thread.start()
        wait_until(lambda: len(answers) >= 10)
        tiny_models.install_version(saved_versions[2], base, 2)
        wait_until(lambda: 2 in answers)
        seen_v2 = len(answers)
        wait_until(lambda: len(answers) >= seen_v2 + 20)
        stop.set()
        for thread in clients:
            thread.join(30)
        assert failures == []
        assert answers[0] == 1 and answers[-1] == 2
        wait_until(lambda: status_rows(running)[1]["state"] == "END")
        assert status_rows(running)[2]["state"] == "AVAILABLE"
    finally:
        stop.set()
        running.stop()


def test_broken_versions_leave_previous_serving_and_show_errors(saved_versions, tmp_path):
    base = str(tmp_path / "tiny")
    tiny_models.install_version(saved_versions[1], base, 1)
    running = start_server(base)
    try:
        tiny_models.install_corrupt_version(base, 2)
        wait_until(lambda: 2 in status_rows(running))
        row = wait_until(lambda: status_rows(running)[2]["state"] == "END"
                         and status_rows(running)[2])
        assert row["status"]["error_code"] == "DATA_LOSS"
        assert "Could not parse SavedModel" in row["status"]["error_message"]
        assert status_rows(running)[1]["state"] == "AVAILABLE"
        status, body = predict(running)
        assert status == 200 and body["predictions"][0]["version"] == 1

        # A version whose warmup request fails is not served either.
        staging = str(tmp_path / "staging")
        tiny_models.install_version(saved_versions[2], staging, 3)
        tiny_models.write_warmup(os.path.join(staging, "3"), [[b"a"]], signature_name="nope")
        os.rename(os.path.join(staging, "3"), os.path.join(base, "3"))
        row = wait_until(lambda: status_rows(running).get(3, {}).get("state") == "END"
                         and status_rows(running)[3])
        assert row["status"]["error_code"] == "INVALID_ARGUMENT"
        assert '"nope" not found' in row["status"]["error_message"]
        status, body = predict(running)
        assert status == 200 and body["predictions"][0]["version"] == 1
    finally:
        running.stop()


def test_warmup_requests_run_before_the_version_is_available(saved_versions, tmp_path):
    base = str(tmp_path / "tiny")
    staging = str(tmp_path / "staging")
    tiny_models.install_version(saved_versions[1], staging, 1)
    tiny_models.write_warmup(os.path.join(staging, "1"), [[b"a"], [b"b", b"c"], [b"d"]])
    os.makedirs(base)
    os.rename(os.path.join(staging, "1"), os.path.join(base, "1"))
    running = start_server(base)
    try:
        # The first request that can reach the version already sees the three
        # warmup calls of serving_default.
        status, body = http("POST", running.rest_url + "/v1/models/tiny:predict",
                            {"signature_name": "call_count", "inputs": 0})
        assert (status, body) == (200, {"outputs": 3})
    finally:
        running.stop()


def test_request_past_deadline_gets_504_and_server_keeps_serving(saved_versions, tmp_path):
    base = str(tmp_path / "tiny")
    tiny_models.install_version(saved_versions[1], base, 1)
    limits = config_lib.ServingLimits(request_timeout_s=0.2)
    running = start_server(base, limits=limits)
    try:
        # The deadline counts from arrival; a first (cold) call may alone take 0.2 s here.
        wait_until(lambda: predict(running)[0] == 200)
        status, body = http("POST", running.rest_url + "/v1/models/tiny:predict",
                            {"signature_name": "slow", "inputs": 300000})
        assert status == 504 and body == {"error": "Deadline Exceeded"}
        status, body = predict(running)
        assert status == 200
    finally:
        running.stop()


def test_stop_lets_in_flight_request_finish(saved_versions, tmp_path):
    base = str(tmp_path / "tiny")
    tiny_models.install_version(saved_versions[1], base, 1)
    running = start_server(base)
    result = {}

    def slow_call():
        result["answer"] = http("POST", running.rest_url + "/v1/models/tiny:predict",
                                {"signature_name": "slow", "inputs": 100000})

    caller = threading.Thread(target=slow_call)
    caller.start()
    model = running.server.registry.model("tiny")
    wait_until(lambda: model.in_flight_requests())
    running.stop()
    caller.join(30)
    status, body = result["answer"]
    assert status == 200 and "outputs" in body


def test_config_reload_adds_a_model_and_a_taken_port_fails_cleanly(saved_versions, tmp_path):
    base = str(tmp_path / "tiny")
    tiny_models.install_version(saved_versions[1], base, 1)
    running = start_server(base, allow_config_reload=True)
    try:
        stub = model_service_pb2_grpc.ModelServiceStub(grpc.insecure_channel(running.grpc_target))
        request = model_management_pb2.ReloadConfigRequest()
        request.config.CopyFrom(config_lib.parse_model_config(
            f"model_config_list {{ config {{ name: 'tiny' base_path: '{base}' }} "
            f"config {{ name: 'copy' base_path: '{base}' }} }}"))
        stub.HandleReloadConfigRequest(request, timeout=60)
        status, body = http("POST", running.rest_url + "/v1/models/copy:predict",
                            {"instances": ["x"]})
        assert (status, body["predictions"][0]["translation"]) == (200, "X")

        taken = config_lib.ServerOptions.from_model(
            "tiny", base, port=running.server.grpc_port, rest_api_port=0)
        with pytest.raises(Exception):
            server_lib.ServerThread(taken).start()
        status, _ = predict(running)
        assert status == 200
    finally:
        running.stop()
