"""Measures the server under the probes of issue 16, on loopback, bounded in time.

    PYTHONPATH=$PWD python tests/serving/measure_operations.py

Prints (and returns as JSON) three numbers, each from the real process
(`python -m keras_transformer.serving`) serving the tiny test model:
  - status latency (max and median of GETs) while a 3 MB columnar request is processed;
  - seconds from SIGTERM to exit with an endless model call in flight (grace 2 s);
  - seconds from a completed copy to AVAILABLE after the incomplete copy failed to
    load, with TF Serving's default poll (1 s) and retry interval (60 s).
"""

import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))


def http(method, url, body=None, timeout=60):
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def start(base, *flags):
    """Starts the server; returns (process, rest_url, grpc_port, output lines)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_transformer.serving", "--model_name=tiny",
         f"--model_base_path={base}", "--port=0", "--web_page=false", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    lines, grpc_port = [], None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        match = re.search(r"Running gRPC ModelServer at .*:(\d+)", line)
        if match:
            grpc_port = int(match.group(1))
        match = re.search(r"Exporting HTTP/REST API at:(.*):(\d+)", line)
        if match:
            threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
            return process, f"http://{match.group(1)}:{match.group(2)}", grpc_port, lines
    process.kill()
    raise RuntimeError("server did not start:\n" + "".join(lines))


def free_port():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def status_latency_during_big_request(base):
    process, url, _, _ = start(base, f"--rest_api_port={free_port()}")
    try:
        big = json.dumps({"inputs": {"text": ["abcdefghi"] * 300000}}).encode()
        runs = []
        for _ in range(3):
            answer = {}

            def send():
                started = time.monotonic()
                answer["status"] = http("POST", url + "/v1/models/tiny:predict", big)[0]
                answer["seconds"] = time.monotonic() - started

            sender = threading.Thread(target=send)
            latencies = []
            sender.start()
            while sender.is_alive():
                started = time.monotonic()
                http("GET", url + "/v1/models/tiny")
                latencies.append(time.monotonic() - started)
            sender.join()
            runs.append({"body_bytes": len(big), "big_status": answer["status"],
                         "big_seconds": round(answer["seconds"], 3),
                         "status_requests": len(latencies),
                         "status_max_ms": round(1000 * max(latencies), 1) if latencies else None,
                         "status_median_ms": round(1000 * statistics.median(latencies), 1)
                         if latencies else None})
        return runs
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def sigterm_to_exit(base, grace=2):
    from test_shutdown import start_slow_grpc_call

    process, _, grpc_port, lines = start(base, f"--rest_api_port={free_port()}",
                                         f"--shutdown_grace_seconds={grace}",
                                         "--rest_api_timeout_in_ms=600000")
    try:
        start_slow_grpc_call(grpc_port)
        time.sleep(1.5)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
        return {"grace_s": grace, "seconds_to_exit": round(time.monotonic() - signalled, 3),
                "exit_code": code}
    finally:
        process.kill()


def copy_to_available(source, root):
    base = pathlib.Path(root) / "copied"
    version = base / "1"
    shutil.copytree(pathlib.Path(source) / "variables", version / "variables")
    process, url, _, _ = start(str(base), f"--rest_api_port={free_port()}")
    try:
        state = http("GET", url + "/v1/models/tiny")[1]["model_version_status"][0]
        assert state["status"]["error_code"] != "OK", state
        shutil.copytree(source, version, dirs_exist_ok=True)
        completed = time.monotonic()
        while time.monotonic() - completed < 120:
            rows = http("GET", url + "/v1/models/tiny")[1]["model_version_status"]
            if rows[0]["state"] == "AVAILABLE":
                return {"first_load": state["status"]["error_code"],
                        "seconds_to_available": round(time.monotonic() - completed, 3),
                        "poll_s": 1, "retry_interval_s": 60}
            time.sleep(0.02)
        return {"seconds_to_available": None}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def main():
    import tiny_models

    with tempfile.TemporaryDirectory() as root:
        source = tiny_models.save_tiny_model(os.path.join(root, "saved"), 1)
        base = os.path.join(root, "tiny")
        tiny_models.install_version(source, base, 1)
        results = {
            "status_during_3mb_request": status_latency_during_big_request(base),
            "sigterm_with_call_in_flight": sigterm_to_exit(base),
            "completed_copy_to_available": copy_to_available(source, root),
        }
    print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
