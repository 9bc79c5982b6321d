"""The machine's ceiling: the matrix-multiplication rate TensorFlow reaches here.

A chain of `CHAIN` square n×n matmuls runs in one `tf.function` (once as is,
once compiled with XLA; the faster counts), in float32 and in bfloat16. Each
matmul is 2·n³ FLOPs; the rate is FLOPs / seconds of the fastest call (n = 2048
on a CPU, 8192 on a GPU). The training benchmark probes the same rate again
between its steps (`MatmulProbe`), and raises the stored value when it sees a
higher one (`update`), so that a ceiling measured during a burst of other load
on the machine does not inflate the fractions. The other
benchmarks divide their model FLOP rates by it ("fraction of ceiling"), so the
values are stored in `results.context`:

    fp32_flops   float32 FLOP/s
    bf16_flops   bfloat16 FLOP/s (None where bfloat16 matmuls do not run)

On a CPU, bfloat16 goes through oneDNN, which is fast only on cores with
AVX512_BF16/AMX; elsewhere it is emulated, so the row is labelled with the
device and the CPU flags it found.
"""

import math
import time

CHAIN = 4  # matmuls per call, so that one call's overhead is amortised


def _device():
    import tensorflow as tf

    return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as file:
            flags = next((line for line in file if line.startswith("flags")), "")
    except OSError:
        return ""
    found = [flag for flag in ("avx512_bf16", "amx_bf16") if flag in flags.split()]
    return "+".join(found) or "no bf16 units"


class MatmulProbe:
    """One compiled chain of CHAIN n×n matmuls; `rate()` times one call.

    Example:
        >>> probe = MatmulProbe("float32", 2048, jit_compile=False)  # doctest: +SKIP
        >>> probe.rate()  # FLOP/s of one call  # doctest: +SKIP
    """

    def __init__(self, dtype, n, jit_compile):
        import tensorflow as tf

        self.n = n
        self.how = "XLA" if jit_compile else "tf.function"
        generator = tf.random.Generator.from_seed(0)
        self._x = tf.cast(generator.normal((n, n)), dtype)
        # Scaled so that the chain's values neither overflow nor vanish.
        self._w = tf.cast(generator.normal((n, n)) / math.sqrt(n), dtype)

        @tf.function(jit_compile=jit_compile)
        def chained(x, w):
            for _ in range(CHAIN):
                x = tf.matmul(x, w)
            return tf.reduce_sum(tf.cast(x, tf.float32))  # needs every element; a cheap sync

        self._chained = chained
        self._chained(self._x, self._w).numpy()  # trace, compile, warm up

    def rate(self):
        begin = time.perf_counter()
        self._chained(self._x, self._w).numpy()
        return CHAIN * 2 * self.n**3 / (time.perf_counter() - begin)


def matrix_size():
    return 8192 if _device() == "GPU" else 2048


def best_probe(dtype, quick=False):
    """(FLOP/s, probe): the faster of the plain and XLA probes, fastest calls.

    The fastest call, not the median: a ceiling is what the machine can do, and
    other load on it only ever adds time.
    """
    min_seconds = 0.5 if quick else 2.0
    best = (0.0, None)
    for jit in (False, True):
        probe = MatmulProbe(dtype, matrix_size(), jit)
        rates = []
        started = time.perf_counter()
        while len(rates) < 3 or time.perf_counter() - started < min_seconds:
            rates.append(probe.rate())
        if max(rates) > best[0]:
            best = (max(rates), probe)
    return best


def update(results, dtype, rate):
    """Raises the stored ceiling of `dtype` to `rate` if that is higher."""
    key = _key(dtype)
    if rate and rate > (results.context.get(key) or 0.0):
        results.context[key] = rate
        results.context.setdefault("ceiling_raised_by", []).append(key)


def _key(dtype):
    return "bf16_flops" if dtype == "bfloat16" else "fp32_flops"


def flops(results, dtype="float32", quick=False):
    """The stored ceiling for `dtype` ("float32" or "bfloat16"), measured if absent."""
    key = _key(dtype)
    if key not in results.context:
        run(results, quick=quick, dtypes=(dtype,))
    return results.context.get(key)


def run(results, quick=False, dtypes=("float32", "bfloat16")):
    device = _device()
    results.context["ceiling_device"] = device
    for dtype in dtypes:
        key = _key(dtype)
        label = "fp32" if dtype == "float32" else "bf16"
        if device == "CPU" and dtype == "bfloat16":
            label += f" (oneDNN, {_cpu_flags()})"
        try:
            rate, probe = best_probe(dtype, quick=quick)
        except Exception as error:  # noqa: BLE001 - a dtype without kernels here
            results.context[key] = None
            text = str(error).strip()
            reason = text.splitlines()[0][:80] if text else type(error).__name__
            print(f"  ceiling: {label} matmul skipped: {reason}")
            results.add("ceiling", f"{device}, {label}", f"matmul rate (skipped: {reason})",
                        None, "GFLOP/s")
            continue
        results.context[key] = rate
        results.context[key + "_how"] = probe.how
        results.add("ceiling", f"{device}, {label}, {probe.n}×{probe.n} ×{CHAIN} ({probe.how})",
                    "matmul rate", rate / 1e9, "GFLOP/s")
