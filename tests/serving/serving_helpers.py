"""Helpers for the serving tests: loopback HTTP calls and bounded waiting."""

import json
import time
import urllib.error
import urllib.request

# Limits of the shared API server (conftest.api_server).
MAX_BODY = 64 * 1024
MAX_INSTANCES = 8


def http(method, url, body=None, headers=None, timeout=30):
    """Sends one request; returns (status, parsed JSON or text)."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode("utf-8")
    elif isinstance(body, str):
        body = body.encode("utf-8")
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, payload = response.status, response.read()
            kind = response.headers.get_content_type()
    except urllib.error.HTTPError as error:
        status, payload, kind = error.code, error.read(), error.headers.get_content_type()
    if kind == "application/json":
        return status, json.loads(payload)
    return status, payload.decode("utf-8")


def wait_until(condition, timeout=20.0, interval=0.05):
    """Polls `condition()` until truthy; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
