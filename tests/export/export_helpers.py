"""Checks shared by the export tests: a fresh Python process, the ops a SavedModel uses."""

import json
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request


def run_python(code, *args, timeout=240):
    """Runs `code` in a fresh interpreter (nothing of this process loaded); returns stdout."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def last_json_line(output):
    return json.loads(output.strip().splitlines()[-1])


def graph_ops_report(path):
    """{"outside": ops neither core TF nor tensorflow-text, "text": tensorflow-text ops,
    "xla": XLA ops} of the SavedModel at `path`, read in a fresh process."""
    return last_json_line(run_python(
        """
        import json, sys
        import tensorflow as tf
        from tensorflow.core.protobuf import saved_model_pb2
        from tensorflow.python.framework import op_def_registry
        model = saved_model_pb2.SavedModel()
        model.ParseFromString(open(sys.argv[1] + "/saved_model.pb", "rb").read())
        graph = model.meta_graphs[0].graph_def
        used = {node.op for node in graph.node}
        functions = {f.signature.name for f in graph.library.function}
        for function in graph.library.function:
            used |= {node.op for node in function.node_def}
        used -= functions
        core = {op for op in used if op_def_registry.get(op) is not None}
        import tensorflow_text  # registers its op library
        text_ops = {op for op in used - core if op_def_registry.get(op) is not None}
        print(json.dumps({"outside": sorted(used - core - text_ops),
                          "text": sorted(used & text_ops),
                          "xla": sorted(op for op in used if op.startswith("Xla"))}))
        """,
        path,
    ))


def post(running, path, body, timeout=60):
    """POSTs JSON to a running server's REST API; returns (status, parsed JSON)."""
    request = urllib.request.Request(running.rest_url + path, method="POST",
                                     data=json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
