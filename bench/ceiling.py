"""The machine's ceiling: the matrix-multiplication rate TensorFlow reaches here.

A chain of `CHAIN` square n×n matmuls runs in one `tf.function` (once as is,
once compiled with XLA; the faster counts), in float32 and in bfloat16. Each
matmul is 2·n³ FLOPs; the rate is FLOPs / median seconds per call. The other
benchmarks divide their model FLOP rates by it ("fraction of ceiling"), so the
values are stored in `results.context`:

    fp32_flops   float32 FLOP/s
    bf16_flops   bfloat16 FLOP/s (None where bfloat16 matmuls do not run)

On a CPU, bfloat16 goes through oneDNN, which is fast only on cores with
AVX512_BF16/AMX; elsewhere it is emulated, so the row is labelled with the
device and the CPU flags it found.
"""

import math

from bench.common import time_call

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


def matmul_rate(dtype, n, jit_compile, min_seconds=1.0):
    """FLOP/s of a chain of CHAIN n×n matmuls in `dtype` (median call time)."""
    import tensorflow as tf

    generator = tf.random.Generator.from_seed(0)
    x = tf.cast(generator.normal((n, n)), dtype)
    # Scaled so that the chain's values neither overflow nor vanish.
    w = tf.cast(generator.normal((n, n)) / math.sqrt(n), dtype)

    @tf.function(jit_compile=jit_compile)
    def chained(x, w):
        for _ in range(CHAIN):
            x = tf.matmul(x, w)
        return tf.reduce_sum(tf.cast(x, tf.float32))  # needs every element; a cheap sync

    seconds = time_call(lambda: chained(x, w).numpy(), warmup=2, repeats=3,
                        min_seconds=min_seconds)
    return CHAIN * 2 * n**3 / seconds


def measure(dtype, quick=False):
    """The best rate over plain and XLA-compiled functions: (FLOP/s, n, how)."""
    device = _device()
    n = 8192 if device == "GPU" else (1024 if quick else 2048)
    min_seconds = 0.3 if quick else 1.5
    best = (0.0, n, None)
    for jit in (False, True):
        rate = matmul_rate(dtype, n, jit, min_seconds)
        if rate > best[0]:
            best = (rate, n, "XLA" if jit else "tf.function")
    return best


def flops(results, dtype="float32", quick=False):
    """The stored ceiling for `dtype` ("float32" or "bfloat16"), measured if absent."""
    key = "bf16_flops" if dtype == "bfloat16" else "fp32_flops"
    if key not in results.context:
        run(results, quick=quick, dtypes=(dtype,))
    return results.context.get(key)


def run(results, quick=False, dtypes=("float32", "bfloat16")):
    device = _device()
    results.context["ceiling_device"] = device
    for dtype in dtypes:
        key = "bf16_flops" if dtype == "bfloat16" else "fp32_flops"
        label = "fp32" if dtype == "float32" else "bf16"
        if device == "CPU" and dtype == "bfloat16":
            label += f" (CPU, oneDNN, {_cpu_flags()})"
        try:
            rate, n, how = measure(dtype, quick=quick)
        except Exception as error:  # noqa: BLE001 - a dtype without kernels here
            results.context[key] = None
            reason = str(error).strip().splitlines()[0][:80] if str(error).strip() else type(error).__name__
            print(f"  ceiling: {label} matmul skipped: {reason}")
            results.add("ceiling", f"{device}, {label}", f"matmul rate (skipped: {reason})",
                        None, "GFLOP/s")
            continue
        results.context[key] = rate
        results.add("ceiling", f"{device}, {label}, {n}×{n} ×{CHAIN} ({how})",
                    "matmul rate", rate / 1e9, "GFLOP/s")
