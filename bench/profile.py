"""Where a training step's time goes: ours and the tutorial's model on the same batches.

Not part of the default run (`python -m bench profile` asks for it). Both models
(the preset's sizes, float32, no XLA) train on the same first `steps` batches of
our pipeline, so the batch shapes and token counts are identical and only the
models, losses and metrics differ:

- step time: every batch of both models in turn, 3 rounds, each batch at its
  fastest round (`bench.training.Design`); ratio = the tutorial model's time / ours.
- op time: one step of each, on the first batch, traced by `tf.profiler`; the
  kernels' times summed per op type (on 2 cores two kernels run at once, so the
  sum exceeds the step time). The rows name the op types that take the most.

This is how the costs of `keras.layers.EinsumDense`'s projection gradients
(`BatchMatMulV2` + `Sum`), of a gather-based label-smoothed loss
(`UnsortedSegmentSum`) and of dropout masks (`StatelessRandomUniformV2`) were found.
"""

import collections
import glob
import os
import re
import tempfile

from bench import training

ROUNDS = 3
TOP_OPS = 8
# Kernel events are named "<op name>:<op type>"; executor and eager wrappers are not.
_KERNEL_EVENT = re.compile(r"^[\w./-]+:(\w+)$")


def op_times(model, batch, steps=2):
    """Milliseconds of kernel time per op type in one `train_on_batch` step."""
    return kernel_times(lambda: model.train_on_batch(*batch), calls=steps)


def kernel_times(function, calls=2):
    """Milliseconds of kernel time per op type in one call of `function()`, traced by
    `tf.profiler` over `calls` calls (call it once before, so that tracing is not timed)."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    with tempfile.TemporaryDirectory(prefix="bench-profile-") as folder:
        tf.profiler.experimental.start(folder)
        try:
            for _ in range(calls):
                function()
        finally:
            tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        for path in glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True):
            with open(path, "rb") as file:
                space.MergeFromString(file.read())
    totals = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                match = _KERNEL_EVENT.match(plane.event_metadata[event.metadata_id].name)
                if match:
                    totals[match.group(1)] += event.duration_ps / 1e9 / calls
    return totals


def run(results, quick=False):
    options = results.options
    preset = options.get("preset", "small")
    steps = options.get("steps") or (2 if quick else 8)
    config = training.model_config(preset)
    ours = training.Design("ours", config, False, token_budget=options.get("token_budget", 4096),
                           steps=steps)
    # The tutorial's model on our batches: only the models, losses and metrics differ.
    designs = {"ours": ours,
               "tutorial": training.Design("tutorial", config, False, batches=ours.batches)}
    for _ in range(ROUNDS):
        for index in range(len(ours.batches)):
            for design in designs.values():
                design.step(index)
    totals = {name: design.summary() for name, design in designs.items()}
    step = {name: total["seconds"] / total["steps"] for name, total in totals.items()}
    tokens = totals["ours"]["tokens"] / totals["ours"]["steps"]
    case = f"{preset}, same {len(ours.batches)} batches (ours), {tokens:.0f} real target tok/step"
    results.add("profile", f"{case}, tutorial model", "step time", step["tutorial"] * 1e3, "ms")
    results.add("profile", f"{case}, ours", "step time", step["ours"] * 1e3, "ms",
                ratio=step["tutorial"] / step["ours"], baseline="tutorial model, same batches")
    for name, design in designs.items():
        for op_type, milliseconds in op_times(design.model, ours.batches[0]).most_common(TOP_OPS):
            results.add("profile", f"{preset}, {name}, first batch",
                        f"op time: {op_type}", milliseconds, "ms per step (kernel time)")
