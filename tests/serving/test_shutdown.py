"""SIGTERM/SIGINT on the real process (`python -m keras_transformer.serving`): drain
for the grace period, then exit even if a model call still runs; a second signal
exits at once."""

import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
# Iterations of the tiny model's `slow` signature: minutes of work, never done here.
ENDLESS = 2_000_000_000


def start_process(base, *flags):
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_transformer.serving", "--model_name=tiny",
         f"--model_base_path={base}", "--port=0", "--rest_api_port=0", "--web_page=false",
         "--rest_api_timeout_in_ms=600000", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        # --rest_api_port=0 means "no REST" only on the command line; the log names
        # the port bound when one is.
        match = re.search(r"Running gRPC ModelServer at .*:(\d+)", line)
        if match:
            return process, int(match.group(1)), lines
    process.kill()
    raise AssertionError("server did not start:\n" + "".join(lines))


def drain_output(process, lines):
    thread = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    thread.start()
    return thread


def start_slow_grpc_call(grpc_port):
    """Sends an endless model call over gRPC from a thread; returns the thread."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.model_spec.signature_name = "slow"
    request.inputs["n"].CopyFrom(tf.make_tensor_proto(ENDLESS, dtype=tf.int32))
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

    def call():
        try:
            stub.Predict(request, timeout=300)
        except grpc.RpcError:
            pass  # The server goes away: that is the point.

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


def test_sigterm_exits_within_grace_period_with_a_model_call_running(one_version):
    process, grpc_port, lines = start_process(one_version, "--shutdown_grace_seconds=1")
    try:
        drain_output(process, lines)
        start_slow_grpc_call(grpc_port)
        time.sleep(1.5)  # The call is running on a model thread by now.
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        elapsed = time.monotonic() - signalled
        assert elapsed < 1 + 3, (elapsed, "".join(lines))
        assert code == 1  # Forced: a call was still running.
        assert any("still running after the 1 s grace period" in line for line in lines)
    finally:
        process.kill()


def test_second_signal_exits_at_once(one_version):
    process, grpc_port, lines = start_process(one_version, "--shutdown_grace_seconds=60")
    try:
        drain_output(process, lines)
        start_slow_grpc_call(grpc_port)
        time.sleep(1.5)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        signalled = time.monotonic()
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
        assert time.monotonic() - signalled < 3, "".join(lines)
        assert code == 1
        assert any("Second signal" in line for line in lines)
    finally:
        process.kill()


def test_sigterm_with_nothing_in_flight_exits_cleanly(one_version):
    process, _, lines = start_process(one_version)
    try:
        drain_output(process, lines)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, "".join(lines)
    finally:
        process.kill()
