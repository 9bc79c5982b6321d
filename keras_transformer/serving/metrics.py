"""Prometheus metrics named as TF Serving names them.

TF Serving exports its `/tensorflow/serving/...` metrics with "/" turned into
":" (`:tensorflow:serving:request_count`). The histograms are
prometheus_client's own `Histogram`s under those exact names. A
prometheus_client Counter would be renamed `..._total`, which breaks dashboards
written for TF Serving, so the request counter alone is kept here and exposed
by a small custom collector.
"""

import threading

from prometheus_client import CollectorRegistry
from prometheus_client import Histogram
from prometheus_client import generate_latest
from prometheus_client.core import Metric

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
REQUEST_COUNT = ":tensorflow:serving:request_count"

# Microseconds, as TF Serving's request_latency: 10us .. 100s.
_LATENCY_BUCKETS_US = tuple(m * 10**e for e in range(1, 8) for m in (1, 2, 5)) + (10**8,)
_BATCH_SIZE_BUCKETS = tuple(2**i for i in range(14))


class _RequestCounter:
    """`:tensorflow:serving:request_count{model_name, status}`, unrenamed."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts = {}  # (model_name, status) -> count

    def increment(self, model_name, status):
        with self._lock:
            key = (model_name, status)
            self._counts[key] = self._counts.get(key, 0) + 1

    def value(self, model_name, status):
        with self._lock:
            return self._counts.get((model_name, status), 0)

    def collect(self):
        """prometheus_client collector protocol."""
        with self._lock:
            counts = sorted(self._counts.items())
        # Type "unknown" keeps the name exactly as TF Serving's (no "_total").
        counter = Metric(REQUEST_COUNT, "The total number of requests.", "unknown")
        for (model_name, status), value in counts:
            counter.add_sample(REQUEST_COUNT, {"model_name": model_name, "status": status}, value)
        yield counter


class ServingMetrics:
    """Request counts, latencies and batch sizes of one server.

    Each server owns its own registry, so several servers in one process (as
    in tests) do not share or clash.
    """

    def __init__(self):
        self.registry = CollectorRegistry(auto_describe=False)
        self._requests = _RequestCounter()
        self.registry.register(self._requests)
        self._latency = Histogram(
            ":tensorflow:serving:request_latency",
            "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
            ["model_name", "API", "entrypoint"], buckets=_LATENCY_BUCKETS_US,
            registry=self.registry)
        self._batch_size = Histogram(
            ":tensorflow:serving:batching_session:processed_batch_size",
            "Tracks the batch size distribution on processing.", ["model_name"],
            buckets=_BATCH_SIZE_BUCKETS, registry=self.registry)

    def record_request(self, model_name, api, entrypoint, status, latency_seconds):
        """Counts one finished request.

        Args:
            model_name: a configured model name, or "" for unknown names (so
                arbitrary client input cannot grow the label set).
            api: "predict", "classify", "regress", "GetModelMetadata", ...
            entrypoint: "REST" or "GRPC".
            status: the canonical code name, "OK" on success.
            latency_seconds: wall time spent on the request.
        """
        self._requests.increment(model_name, status)
        self._latency.labels(model_name, api, entrypoint).observe(latency_seconds * 1e6)

    def record_batch(self, model_name, batch_size):
        self._batch_size.labels(model_name).observe(batch_size)

    def request_count(self, model_name, status="OK"):
        return self._requests.value(model_name, status)

    def exposition(self):
        """The metrics in Prometheus text format (bytes)."""
        return generate_latest(self.registry)
