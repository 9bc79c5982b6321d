"""Timing, machine description and result records shared by the benchmarks."""

import json
import os
import platform
import statistics
import time


# The jit_compile settings of the command line's `--xla` choices.
XLA_MODES = {"both": (False, True), "on": (True,), "off": (False,)}


def jit_modes(options, default="both"):
    """The jit_compile settings `results.options["xla"]` ("on", "off", "both") asks for."""
    return XLA_MODES[options.get("xla", default)]


# The command line's thread options: TensorFlow's setter and TF Serving's flag.
THREAD_POOLS = {
    "intra_op_threads": ("set_intra_op_parallelism_threads",
                         "intra-op threads (one op's threads); TF Serving's "
                         "--tensorflow_intra_op_parallelism"),
    "inter_op_threads": ("set_inter_op_parallelism_threads",
                         "inter-op threads (ops run at once); TF Serving's "
                         "--tensorflow_inter_op_parallelism"),
}


def use_threads(options):
    """Sets TensorFlow's thread pools before any op runs, from `options` (a dict with
    the `THREAD_POOLS` keys; 0 or absent keeps TensorFlow's choice, one a core)."""
    import tensorflow as tf

    for name, (setter, _) in THREAD_POOLS.items():
        if options.get(name):
            getattr(tf.config.threading, setter)(options[name])


def machine():
    """A short description of where the numbers come from."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "gpus": [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus],
        "tensorflow": tf.__version__,
    }


def time_call(function, warmup=1, repeats=5, min_seconds=0.0):
    """Median seconds per call of `function()` after `warmup` untimed calls."""
    for _ in range(warmup):
        function()
    times = []
    started = time.perf_counter()
    while len(times) < repeats or time.perf_counter() - started < min_seconds:
        begin = time.perf_counter()
        function()
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def _number(value):
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    return f"{value:.4g}"


def rounds_for_batch(batch_size, repeats, full_batch=32, most=5):
    """Rounds of `time_interleaved` for a batch of `batch_size` rows: `repeats` from
    `full_batch` rows up, and up to `most` times as many for smaller batches.

    A call at batch 1 takes a fifth to an eighth of the time of one at batch 32, and a VM's speed
    drifts from second to second: five interleaved rounds at batch 1 (a few seconds)
    gave the decoding ratio anywhere from 5.2x to 6.7x within one minute, twenty
    rounds 5.8x to 6.3x (bench/README.md).
    """
    return repeats * max(1, min(most, -(-full_batch // batch_size)))


def time_interleaved(functions, warmup=1, repeats=5):
    """Median seconds per call of each of `functions`, called in turn.

    Alternating the calls spreads a change in the machine's load over all of
    them, so their ratios hold better on a busy machine than separate runs.
    """
    for function in functions:
        for _ in range(warmup):
            function()
    times = [[] for _ in functions]
    for _ in range(repeats):
        for function, spent in zip(functions, times):
            begin = time.perf_counter()
            function()
            spent.append(time.perf_counter() - begin)
    return [statistics.median(spent) for spent in times]


class Results:
    """Collects rows of (benchmark, case, metric, value, unit, baseline ratio)."""

    def __init__(self, options=None):
        self.rows = []
        # Values one benchmark leaves for the others (e.g. "fp32_flops", the
        # measured float32 matmul rate in FLOP/s, set by bench.ceiling) and the
        # command-line options every benchmark reads (preset, precision, XLA).
        self.context = {}
        self.options = dict(options or {})

    def add(self, benchmark, case, metric, value, unit, ratio=None, baseline=None):
        self.rows.append(
            {
                "benchmark": benchmark,
                "case": case,
                "metric": metric,
                "value": value,
                "unit": unit,
                "ratio_vs_baseline": ratio,
                "baseline": baseline,
            }
        )

    def table(self):
        lines = [
            "| benchmark | case | metric | value | unit | × baseline |",
            "|---|---|---|---:|---|---:|",
        ]
        for row in self.rows:
            ratio = "" if row["ratio_vs_baseline"] is None else f"{row['ratio_vs_baseline']:.2f}×"
            lines.append(
                f"| {row['benchmark']} | {row['case']} | {row['metric']} | "
                f"{_number(row['value'])} | {row['unit']} | {ratio} |"
            )
        return "\n".join(lines)

    def save(self, path, extra=None):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as file:
            json.dump(
                {
                    "machine": machine(),
                    **(extra or {}),
                    "options": self.options,
                    "context": self.context,
                    "results": self.rows,
                },
                file,
                indent=2,
            )
