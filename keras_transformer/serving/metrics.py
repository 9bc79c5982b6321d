"""Prometheus metrics named as TF Serving names them.

TF Serving exports its `/tensorflow/serving/...` metrics with "/" turned into
":" (`:tensorflow:serving:request_count`). prometheus_client's Counter would
rename a counter to `..._total`, which breaks dashboards written for TF
Serving, so the values are kept here and exposed by a custom collector under
the exact names.
"""

import bisect
import threading

from prometheus_client import CollectorRegistry
from prometheus_client import generate_latest
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.core import Metric

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Microseconds, as TF Serving's request_latency: 10us .. 100s.
_LATENCY_BUCKETS_US = tuple(m * 10**e for e in range(1, 8) for m in (1, 2, 5)) + (10**8,)
_BATCH_SIZE_BUCKETS = tuple(2**i for i in range(14))


class _Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.total = 0.0

    def observe(self, value):
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value

    def cumulative(self):
        running, out = 0, []
        for bound, count in zip(self.buckets + (float("inf"),), self.counts):
            running += count
            out.append((repr(float(bound)) if bound != float("inf") else "+Inf", running))
        return out


class ServingMetrics:
    """Request counts, latencies and batch sizes of one server.

    Each server owns its own registry, so several servers in one process (as
    in tests) do not share or clash.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._request_count = {}  # (model_name, status) -> count
        self._latency = {}  # (model_name, API, entrypoint) -> _Histogram
        self._batch_size = {}  # (model_name,) -> _Histogram
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

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
        with self._lock:
            key = (model_name, status)
            self._request_count[key] = self._request_count.get(key, 0) + 1
            hist = self._latency.setdefault((model_name, api, entrypoint),
                                            _Histogram(_LATENCY_BUCKETS_US))
            hist.observe(latency_seconds * 1e6)

    def record_batch(self, model_name, batch_size):
        with self._lock:
            histogram = self._batch_size.setdefault(model_name, _Histogram(_BATCH_SIZE_BUCKETS))
            histogram.observe(batch_size)

    def request_count(self, model_name, status="OK"):
        with self._lock:
            return self._request_count.get((model_name, status), 0)

    def collect(self):
        """prometheus_client collector protocol."""
        with self._lock:
            counts = dict(self._request_count)
            latency = {k: (h.cumulative(), h.total) for k, h in self._latency.items()}
            batches = {k: (h.cumulative(), h.total) for k, h in self._batch_size.items()}
        name = ":tensorflow:serving:request_count"
        # "unknown" keeps the name exactly as TF Serving's (no "_total").
        counter = Metric(name, "The total number of requests.", "unknown")
        for (model_name, status), value in sorted(counts.items()):
            counter.add_sample(name, {"model_name": model_name, "status": status}, value)
        yield counter
        family = HistogramMetricFamily(
            ":tensorflow:serving:request_latency",
            "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
            labels=["model_name", "API", "entrypoint"])
        for labels, (buckets, total) in sorted(latency.items()):
            family.add_metric(list(labels), buckets, total)
        yield family
        family = HistogramMetricFamily(
            ":tensorflow:serving:batching_session:processed_batch_size",
            "Tracks the batch size distribution on processing.", labels=["model_name"])
        for model_name, (buckets, total) in sorted(batches.items()):
            family.add_metric([model_name], buckets, total)
        yield family

    def exposition(self):
        """The metrics in Prometheus text format (bytes)."""
        return generate_latest(self.registry)
