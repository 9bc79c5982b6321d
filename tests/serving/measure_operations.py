"""Measures the server under the probes of issues 16 and 56, on loopback, bounded in time.

    PYTHONPATH=$PWD python tests/serving/measure_operations.py
    PYTHONPATH=$PWD python tests/serving/measure_operations.py --abuse \
        --translator export/zh_en --language_model export/english \
        --classifier export/sentence_type [--clients 32 --seconds 30]
    PYTHONPATH=$PWD python tests/serving/measure_operations.py --abuse --tiny_exports /tmp/tiny

Without --abuse: three numbers from the real process (`python -m
keras_transformer.serving`) serving the tiny test model (issue 16):
  - status latency (max and median of GETs) while a 3 MB columnar request is processed;
  - seconds from SIGTERM to exit with an endless model call in flight (grace 2 s);
  - seconds from a completed copy to AVAILABLE after the incomplete copy failed to
    load, with TF Serving's default poll (1 s) and retry interval (60 s).

With --abuse: one server process holding the three models (a --model_config_file;
each path a model base folder of version folders, the model named after the folder),
default flags, and issue 56's probes:
  - peak server memory (RSS above the idle level) during a :classify of 1,000 examples
    with a 3.5 MB context, and during a REST `attention` request of 250 rows x 150
    characters (with the answers);
  - seconds from the clients' deadline (2 s) until the server's CPU use falls back to
    idle (the end of its last busy 0.1 s interval), after six gRPC translate_n_best
    calls of 200 rows x 150 characters;
  - the worst latency of 1-row requests to the language model and the classifier
    meanwhile;
  - a load run: --clients threads for --seconds, ordinary requests with abusive ones
    mixed in (every 8th); each answer is checked against what its kind expects, and
    the unexpected ones are counted, and the worst latency of each kind kept.
After the JSON, one line for each of these numbers.
--tiny_exports DIR first writes untrained tiny exports of the three tasks to DIR (a
check that the script runs; their numbers say nothing about the demo models).
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
import urllib.error
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


# ------------------------------------------------------------------ issue 56


CHINESE = "我们明天早上去公园散步，然后一起吃午饭好吗？"  # 22 characters


def chinese_text(characters):
    return (CHINESE * (characters // len(CHINESE) + 1))[:characters]


class ServerProcess:
    """The server on a model config file, with its resident memory and CPU time."""

    def __init__(self, models, root, *flags):
        entries = "".join(f"config {{ name: '{name}' base_path: '{path}' }} "
                          for name, path in models.items())
        config = pathlib.Path(root) / "models.config"
        config.write_text(f"model_config_list {{ {entries}}}")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "keras_transformer.serving", f"--model_config_file={config}",
             "--port=0", f"--rest_api_port={free_port()}", "--web_page=false", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)})
        self.lines, self.url, self.grpc_port = [], None, None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and self.url is None:
            line = self.process.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            match = re.search(r"Running gRPC ModelServer at .*:(\d+)", line)
            if match:
                self.grpc_port = int(match.group(1))
            match = re.search(r"Exporting HTTP/REST API at:(.*):(\d+)", line)
            if match:
                self.url = f"http://{match.group(1)}:{match.group(2)}"
        if self.url is None:
            self.process.kill()
            raise RuntimeError("server did not start:\n" + "".join(self.lines))
        threading.Thread(target=lambda: self.lines.extend(self.process.stdout),
                         daemon=True).start()

    def rss_mb(self):
        for line in open(f"/proc/{self.process.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self):
        fields = open(f"/proc/{self.process.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def post_json(url, document, timeout=120):
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    request = urllib.request.Request(url, data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, OSError) as error:
        return f"no answer: {error}", b""


def peak_memory_during(server, work):
    """(answer of work(), RSS before in MB, peak RSS above it in MB, seconds)."""
    before = server.rss_mb()
    peak, answer = before, {}
    started = time.monotonic()
    worker = threading.Thread(target=lambda: answer.update(result=work()))
    worker.start()
    while worker.is_alive():
        peak = max(peak, server.rss_mb())
        time.sleep(0.05)
    status, body = answer["result"]
    text = body[:160].decode("utf-8", "replace") if status != 200 else f"{len(body)} bytes"
    return {"status": status, "answer": text, "rss_before_mb": round(before),
            "peak_above_mb": round(peak - before), "seconds": round(time.monotonic() - started, 2)}


class CpuWatch:
    """Samples the server's CPU time every `interval` seconds on a thread of its own.

    An interval is busy when the server used more than its idle rate plus two clock
    ticks (0.02 CPU-seconds) in it: one model thread at work uses the whole interval.
    """

    def __init__(self, server, idle_rate, interval=0.1):
        self.server, self.idle_rate, self.interval = server, idle_rate, interval
        self.last_busy_end, self._stop = None, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        before, cpu = time.monotonic(), self.server.cpu_seconds()
        while not self._stop.wait(self.interval):
            now, used = time.monotonic(), self.server.cpu_seconds()
            if used - cpu > self.idle_rate * (now - before) + 0.02:
                self.last_busy_end = now
            before, cpu = now, used

    def wait_quiet(self, quiet_seconds=2.0, limit=300.0):
        """Waits until no interval was busy for `quiet_seconds`; returns the last busy end."""
        started = time.monotonic()
        while time.monotonic() - started < limit:
            last = self.last_busy_end
            if time.monotonic() - (started if last is None else last) >= quiet_seconds:
                break
            time.sleep(self.interval)
        self._stop.set()
        self._thread.join()
        return self.last_busy_end


def idle_cpu_rate(server, seconds=2.0):
    """The server's CPU-seconds a second while nothing is asked of it."""
    started, cpu = time.monotonic(), server.cpu_seconds()
    time.sleep(seconds)
    return (server.cpu_seconds() - cpu) / (time.monotonic() - started)


def abandoned_work(server, names, probe_seconds=None):
    """Six gRPC translate_n_best calls with a 2 s deadline.

    Without `probe_seconds`: seconds from the deadline until the server's CPU use
    falls back to idle (the end of its last busy 0.1 s interval, see `CpuWatch`; 0
    when the work ended before the deadline). With it: 1-row requests to the other
    two models, from the start for that long, and their latencies.
    """
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = names["translator"]
    request.model_spec.signature_name = "translate_n_best"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto([chinese_text(150)] * 200,
                                                         dtype=tf.string))
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    codes, others = [], []

    def call():
        try:
            stub.Predict(request, timeout=2.0)
            codes.append("OK")
        except grpc.RpcError as error:
            codes.append(error.code().name)

    def one_row(name, document, end):
        while time.monotonic() < end:
            started = time.monotonic()
            status, _ = post_json(f"{server.url}/v1/models/{name}:predict", document)
            others.append((name, status, time.monotonic() - started))

    idle_rate = idle_cpu_rate(server)
    watch = None if probe_seconds else CpuWatch(server, idle_rate)
    started = time.monotonic()
    threads = [threading.Thread(target=call) for _ in range(6)]
    if probe_seconds:
        end = started + probe_seconds
        threads += [threading.Thread(target=one_row, args=(names["language_model"], {
                        "instances": ["Tom is"]}, end)),
                    threading.Thread(target=one_row, args=(names["classifier"], {
                        "instances": ["Who are you?"]}, end))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    deadline_at = started + 2.0
    result = {"client_codes": sorted(codes)}
    if probe_seconds:
        latencies = [seconds for _, _, seconds in others]
        result.update({
            "probe_seconds": probe_seconds,
            "one_row_requests_to_other_models": len(others),
            "their_statuses": sorted({str(status) for _, status, _ in others}),
            "their_worst_latency_s": round(max(latencies), 3) if latencies else None,
            "their_median_latency_s": round(statistics.median(latencies), 3)
            if latencies else None})
    else:
        last_busy = watch.wait_quiet()
        result["seconds_after_deadline_until_quiet"] = (
            0.0 if last_busy is None else round(max(0.0, last_busy - deadline_at), 2))
        result["idle_cpu_per_second"] = round(idle_rate, 3)
    channel.close()
    return result


def raw_http(url, head):
    import socket

    host, port = url[len("http://"):].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(head)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return int(answer.split()[1]), answer.partition(b"\r\n\r\n")[2]


def load_run(server, names, clients, seconds):
    """`clients` threads for `seconds`; every 8th request abusive. Returns the tallies."""
    import random

    t, lm, c = names["translator"], names["language_model"], names["classifier"]
    ordinary = [
        ("translate", t, {"instances": ["我们来试试。"]}, {200}),
        ("sample", lm, {"signature_name": "sample", "instances": [{
            "text": "Tom is", "temperature": 0.8, "top_k": 40, "top_p": 0.95, "seed": 1,
            "max_new_tokens": 8}]}, {200}),
        ("classify", c, {"signature_name": "classify", "examples": [{"text": "Who are you?"}]},
         {200}),
    ]
    # attention: 200 when the model's maps fit --max_response_bytes (a tiny model's).
    abusive = [
        ("big_integer", t, b'{"instances": [' + b"7" * 5000 + b"]}", {400}),
        ("context", c, {"signature_name": "classify", "context": {"note": "x" * 3_500_000},
                        "examples": [{"text": "why?"}] * 1000}, {413}),
        ("attention", t, {"signature_name": "attention",
                          "instances": [chinese_text(150)] * 250}, {200, 400, 504}),
        ("huge_max_new_tokens", lm, {"signature_name": "sample", "instances": [{
            "text": "Tom is", "temperature": 1e30, "top_k": 40, "top_p": 1.0, "seed": 1,
            "max_new_tokens": 2147483646}]}, {400}),
        ("bad_content_length", t, None, {400}),
    ]
    tallies, lock = {}, threading.Lock()
    end = time.monotonic() + seconds

    def client(index):
        rng = random.Random(index)
        count = 0
        while time.monotonic() < end:
            count += 1
            kind, model, document, expected = (rng.choice(abusive) if count % 8 == 0
                                               else rng.choice(ordinary))
            began = time.monotonic()
            if document is None:
                status, _ = raw_http(server.url, b"POST /v1/models/x:predict HTTP/1.1\r\n"
                                     b"Host: x\r\nContent-Length: 2\r\nContent-Length: 3"
                                     b"\r\n\r\n{}")
            else:
                status, _ = post_json(f"{server.url}/v1/models/{model}:predict"
                                      if kind not in ("classify", "context")
                                      else f"{server.url}/v1/models/{model}:classify", document)
            took = time.monotonic() - began
            with lock:
                row = tallies.setdefault(kind, {"expected": 0, "unexpected": {}, "worst_s": 0.0})
                row["worst_s"] = round(max(row["worst_s"], took), 2)
                if status in expected:
                    row["expected"] += 1
                else:
                    row["unexpected"][str(status)] = row["unexpected"].get(str(status), 0) + 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"clients": clients, "seconds": seconds, "by_kind": tallies,
            "unexpected": sum(sum(row["unexpected"].values()) for row in tallies.values())}


def write_tiny_exports(root):
    """Untrained tiny exports of the three tasks under `root`; returns their base paths."""
    import keras
    from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH
    from keras_transformer.data.corpus import LabelledFile
    from keras_transformer.data.corpus import TextFile
    from keras_transformer.export.command import export_run
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.tasks.loading import task_for

    runs = {
        "zh_en": ("translate", str(DEFAULT_CMN_ENG_PATH),
                  dict(max_pairs=400, source_vocab_size=400, target_vocab_size=250)),
        "english": ("lm", TextFile(str(DEFAULT_CMN_ENG_PATH), column=0, language="en"),
                    dict(max_examples=400, vocab_size=300)),
        "sentence_type": ("classify", LabelledFile(
            str(DEFAULT_CMN_ENG_PATH.parents[1] / "sentence-type" / "en.tsv"), language="en"),
            dict(max_examples=400, vocab_size=300)),
    }
    bases = {}
    for name, (task, data, options) in runs.items():
        run_dir = os.path.join(root, f"run-{name}")
        task_for(task).prepare(run_dir, data, "tiny", model_overrides={"max_length": 32},
                               **options)
        keras.utils.set_random_seed(11)
        config = RunFolder(run_dir).config
        task_for(config).build_model(config).save_weights(RunFolder(run_dir).final_weights_path)
        export_run(run_dir, name, base=os.path.join(root, "export"), preset=False)
        bases[name] = os.path.join(root, "export", name)
    return {"translator": bases["zh_en"], "language_model": bases["english"],
            "classifier": bases["sentence_type"]}


def abuse(paths, clients, seconds):
    models = {os.path.basename(os.path.normpath(path)): os.path.abspath(path)
              for path in paths.values()}
    names = {role: os.path.basename(os.path.normpath(path)) for role, path in paths.items()}
    with tempfile.TemporaryDirectory() as root:
        server = ServerProcess(models, root)
        try:
            t, c = names["translator"], names["classifier"]
            results = {"models": names}
            results["context_probe"] = peak_memory_during(server, lambda: post_json(
                f"{server.url}/v1/models/{c}:classify",
                {"signature_name": "classify", "context": {"note": "x" * 3_500_000},
                 "examples": [{"text": "Who are you?"}] * 1000}))
            results["attention_probe"] = peak_memory_during(server, lambda: post_json(
                f"{server.url}/v1/models/{t}:predict",
                {"signature_name": "attention", "instances": [chinese_text(150)] * 250}))
            stopped = abandoned_work(server, names)
            results["abandoned_translate_n_best"] = stopped
            quiet = stopped["seconds_after_deadline_until_quiet"]
            results["other_models_meanwhile"] = abandoned_work(
                server, names, probe_seconds=round(2 + quiet + 2, 1))
            results["load_run"] = load_run(server, names, clients, seconds)
            results["server_rss_after_mb"] = round(server.rss_mb())
        finally:
            server.stop()
    return results


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--abuse", action="store_true", help="issue 56's probes")
    for role in ("translator", "language_model", "classifier"):
        parser.add_argument(f"--{role}", help=f"base path of the {role} model")
    parser.add_argument("--tiny_exports", help="write tiny untrained exports here and use them")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args(argv)
    if not args.abuse:
        return operations()
    if args.tiny_exports:
        paths = write_tiny_exports(args.tiny_exports)
    else:
        paths = {role: getattr(args, role) for role in ("translator", "language_model",
                                                        "classifier")}
        missing = [role for role, path in paths.items() if not path]
        if missing:
            parser.error("--abuse needs --translator, --language_model and --classifier "
                         "(or --tiny_exports)")
    results = abuse(paths, args.clients, args.seconds)
    print(json.dumps(results, indent=2, ensure_ascii=False))
    print("\n".join(abuse_summary(results)))
    return results


def abuse_summary(results):
    """The four numbers issue 56 asks for, one line each."""
    lines = []
    for key, what in (("context_probe", ":classify, 1,000 examples, 3.5 MB context"),
                      ("attention_probe", "REST attention, 250 rows x 150 characters")):
        probe = results[key]
        lines.append(f"peak server memory, {what}: +{probe['peak_above_mb']} MB above "
                     f"{probe['rss_before_mb']} MB (answer {probe['status']} after "
                     f"{probe['seconds']} s)")
    stopped = results["abandoned_translate_n_best"]
    lines.append(f"abandoned work (6 gRPC translate_n_best, 200 x 150 characters, 2 s deadline): "
                 f"server CPU back to idle {stopped['seconds_after_deadline_until_quiet']} s "
                 f"after the deadline (clients got {', '.join(stopped['client_codes'])})")
    others = results["other_models_meanwhile"]
    lines.append(f"1-row requests to the other models meanwhile: worst "
                 f"{others['their_worst_latency_s']} s, median {others['their_median_latency_s']}"
                 f" s over {others['one_row_requests_to_other_models']} requests (statuses "
                 f"{', '.join(others['their_statuses'])})")
    load = results["load_run"]
    total = sum(row["expected"] + sum(row["unexpected"].values())
                for row in load["by_kind"].values())
    failures = {kind: row["unexpected"] for kind, row in load["by_kind"].items()
                if row["unexpected"]}
    lines.append(f"load run ({load['clients']} clients, {load['seconds']} s, every 8th request "
                 f"abusive): {load['unexpected']} unexpected answers of {total}"
                 + (f": {failures}" if failures else ""))
    worst = {kind: load["by_kind"][kind]["worst_s"] for kind in ("translate", "sample", "classify")
             if kind in load["by_kind"]}
    lines.append("load run, worst latency of the 1-row requests: "
                 + ", ".join(f"{kind} {seconds} s" for kind, seconds in worst.items()))
    return lines


def operations():
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
