"""Dynamic batching: concurrent requests share model calls, each gets its rows."""

import concurrent.futures
import threading

import numpy as np
import pytest

from serving_helpers import http
import tiny_models
from keras_transformer.serving import batching
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import errors
from keras_transformer.serving import server as server_lib


class RecordingModel:
    """Doubles its input and records the batch sizes it was called with."""

    def __init__(self, release=None):
        self.batch_sizes = []
        self._release = release

    def __call__(self, inputs, should_stop):
        if self._release is not None:
            self._release.wait(10)
        self.batch_sizes.append(inputs["x"].shape[0])
        return {"y": inputs["x"] * 2}


def submit_concurrently(scheduler, arrays):
    barrier = threading.Barrier(len(arrays))

    def submit(array):
        barrier.wait(10)
        return scheduler.submit({"x": array}).result(10)

    with concurrent.futures.ThreadPoolExecutor(len(arrays)) as pool:
        return list(pool.map(submit, arrays))


def test_concurrent_requests_are_merged_and_split_back():
    model = RecordingModel()
    options = config_lib.BatchingOptions(max_batch_size=32, batch_timeout_micros=500_000,
                                         num_batch_threads=1)
    scheduler = batching.BatchScheduler(model, options)
    arrays = [np.full((i + 1, 3), i, np.int32) for i in range(6)]  # 21 rows in all.
    results = submit_concurrently(scheduler, arrays)
    scheduler.stop()
    for array, result in zip(arrays, results):
        np.testing.assert_array_equal(result["y"], array * 2)
    assert len(model.batch_sizes) < len(arrays)
    assert sum(model.batch_sizes) == 21


def test_batches_never_exceed_max_batch_size_and_pad_to_allowed_sizes():
    model = RecordingModel()
    options = config_lib.BatchingOptions(max_batch_size=4, batch_timeout_micros=200_000,
                                         num_batch_threads=1, allowed_batch_sizes=(2, 4))
    scheduler = batching.BatchScheduler(model, options)
    arrays = [np.full((1, 2), i, np.float32) for i in range(5)]
    results = submit_concurrently(scheduler, arrays)
    scheduler.stop()
    for array, result in zip(arrays, results):
        np.testing.assert_array_equal(result["y"], array * 2)
    assert max(model.batch_sizes) <= 4
    assert all(size in (1, 2, 4) for size in model.batch_sizes)  # 1: a lone request.


def test_variable_length_inputs_are_padded_with_the_first_value():
    model = RecordingModel()
    options = config_lib.BatchingOptions(max_batch_size=8, batch_timeout_micros=300_000,
                                         num_batch_threads=1, pad_variable_length_inputs=True)
    scheduler = batching.BatchScheduler(model, options)
    short, long = np.array([[7]], np.int32), np.array([[1, 2, 3]], np.int32)
    results = submit_concurrently(scheduler, [short, long])
    scheduler.stop()
    assert model.batch_sizes == [2]  # One call for both lengths.
    # The short row was padded with its first value (7) to length 3.
    assert [r["y"].tolist() for r in results] == [[[14, 14, 14]], [[2, 4, 6]]]


def test_oversized_task_and_full_queue_are_refused():
    release = threading.Event()
    model = RecordingModel(release)
    options = config_lib.BatchingOptions(max_batch_size=2, batch_timeout_micros=0,
                                         num_batch_threads=1, max_enqueued_batches=1)
    scheduler = batching.BatchScheduler(model, options)
    with pytest.raises(errors.ServingError) as raised:
        scheduler.submit({"x": np.zeros((3, 1))})
    assert raised.value.code == "INVALID_ARGUMENT"
    running = scheduler.submit({"x": np.zeros((2, 1))})  # Taken by the batch thread.
    queued = None
    for _ in range(100):  # Until the thread holds the first task, the queue is full.
        try:
            queued = scheduler.submit({"x": np.zeros((2, 1))})
            break
        except errors.ServingError:
            threading.Event().wait(0.01)
    with pytest.raises(errors.ServingError) as raised:
        scheduler.submit({"x": np.zeros((1, 1))})
    assert raised.value.code == "UNAVAILABLE"
    release.set()
    assert running.result(10)["y"].shape == (2, 1)
    assert queued is not None and queued.result(10)["y"].shape == (2, 1)
    scheduler.stop()


def test_server_merges_concurrent_requests_into_fewer_model_calls(saved_versions, tmp_path):
    base = str(tmp_path / "tiny")
    tiny_models.install_version(saved_versions[1], base, 1)
    options = server_lib.ServerOptions.from_model(
        "tiny", base, port=0, rest_api_port=0, poll_seconds=0,
        batching=config_lib.BatchingOptions(max_batch_size=16, batch_timeout_micros=400_000,
                                            num_batch_threads=1))
    texts = [f"text {i}" for i in range(8)]
    with server_lib.ServerThread(options) as running:
        barrier = threading.Barrier(len(texts))

        def call(text):
            barrier.wait(10)
            return http("POST", running.rest_url + "/v1/models/tiny:predict",
                        {"instances": [text]})

        with concurrent.futures.ThreadPoolExecutor(len(texts)) as pool:
            answers = list(pool.map(call, texts))
        for text, (status, body) in zip(texts, answers):
            assert status == 200
            assert body["predictions"][0]["translation"] == text.upper()
        status, body = http("POST", running.rest_url + "/v1/models/tiny:predict",
                            {"signature_name": "call_count", "inputs": 0})
        assert status == 200
        assert 1 <= body["outputs"] < len(texts)  # The model ran fewer times than requests.
        _, metrics = http("GET", running.rest_url + "/monitoring/prometheus/metrics")
        batch_sizes = ":tensorflow:serving:batching_session:processed_batch_size_count"
        assert batch_sizes + '{model_name="tiny"}' in metrics
