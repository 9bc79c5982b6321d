"""Byte budgets and model calls that stop: what keeps a small request from costing a lot.

Three rules, each answered with a 4xx that names its flag:

- A request's decoded input tensors may hold at most `max_tensor_bytes`
  (numbers at their width, strings at their length). Every check runs before
  the bytes it counts are copied: a TensorProto's size from its shape, a
  Classify context once per example (it is copied into each).
- One request's outputs may hold at most `max_response_bytes`, counted slice by
  slice as they are produced, before anything is encoded.
- A call runs as slices of rows sized, from the pace of the previous call, to
  take about `slice_seconds` each (at most `max_rows_per_call` rows), and
  `should_stop()` (the deadline passed, or the client left) is asked before
  every slice. A call's abandoned work thus ends within one slice; a signature
  without a batch dimension cannot be sliced and runs to its end. The server
  runs a call's slices in turn with other calls' (`scheduling.SliceScheduler`).

Shapes: B rows (axis 0 of every input and output of a sliceable signature).
"""

import time
import typing

import numpy as np

from keras_transformer.serving import errors

REQUEST_FLAG = "--max_request_tensor_bytes"
RESPONSE_FLAG = "--max_response_bytes"


def array_bytes(array):
    """Bytes an array's values take: numbers at their width, strings at their length."""
    array = np.asarray(array)
    if array.dtype.kind == "O":
        return sum(len(value) for value in array.flat)
    return array.nbytes


def request_too_large(what, size, limit, advice="send fewer rows per request"):
    """RESOURCE_EXHAUSTED (HTTP 413) for a request over `--max_request_tensor_bytes`."""
    return errors.ServingError(
        "RESOURCE_EXHAUSTED",
        f"{what} hold {size} bytes; this server accepts at most {limit} bytes of input "
        f"tensors per request ({REQUEST_FLAG}): {advice}",
        http_status=413)


def check_request_bytes(inputs, limit):
    """Raises `request_too_large` when decoded `inputs` {name: array} exceed `limit`."""
    size = sum(array_bytes(array) for array in inputs.values())
    if size > limit:
        raise request_too_large("The request's input tensors", size, limit)


def response_too_large(signature_name, size, limit, rows_done=None, rows=None):
    """RESOURCE_EXHAUSTED (HTTP 400: retrying cannot help) for outputs over the limit."""
    progress = ("" if rows is None
                else f" after {rows_done} of its {rows} rows")
    return errors.ServingError(
        "RESOURCE_EXHAUSTED",
        f"Signature '{signature_name}' produced {size} bytes of outputs{progress}; this server "
        f"returns at most {limit} bytes per request ({RESPONSE_FLAG}): send fewer rows per "
        "request", http_status=400)


def deadline_exceeded(message="Deadline Exceeded"):
    return errors.ServingError("DEADLINE_EXCEEDED", message)


def pad_to_common_shape(arrays, fill=None):
    """Pads (B_i, ...) arrays to the largest trailing shape.

    Args:
        arrays: arrays of one dtype and rank.
        fill: the padding value; None pads each array with its first value
            (TF Serving's pad_variable_length_inputs), and "" / 0 when empty.

    Returns:
        The arrays, those that already agree unchanged.
    """
    target = tuple(max(sizes) for sizes in zip(*(a.shape[1:] for a in arrays)))
    padded = []
    for array in arrays:
        if array.shape[1:] == target:
            padded.append(array)
            continue
        widths = [(0, 0)] + [(0, t - s) for s, t in zip(array.shape[1:], target)]
        value = fill
        if value is None and array.size:
            value = array.flat[0]
        if value is None:
            value = b"" if array.dtype == object else 0
        padded.append(np.pad(array, widths, mode="constant", constant_values=value))
    return padded


def _concatenate_outputs(parts):
    """One {name: (B, ...)} from slices' outputs; variable trailing sizes padded with 0 / ""."""
    if len(parts) == 1:
        return parts[0]
    merged = {}
    for name in parts[0]:
        arrays = [part[name] for part in parts]
        fill = b"" if arrays[0].dtype.kind in ("O", "S") else 0
        merged[name] = np.concatenate(pad_to_common_shape(arrays, fill), axis=0)
    return merged


def check_response_bytes(signature_name, outputs, limit):
    """Raises `response_too_large` when `outputs` {name: array} exceed `limit`."""
    size = sum(array_bytes(array) for array in outputs.values())
    if size > limit:
        raise response_too_large(signature_name, size, limit)


class Pace(typing.NamedTuple):
    """What one model call took: `seconds` of wall time for `rows` rows of `bytes` input bytes."""

    seconds: float
    rows: int
    bytes: int


def row_bytes(inputs, rows):
    """(rows,) int64: each row's input bytes, counted as `array_bytes` counts them."""
    sizes = np.zeros(rows, np.int64)
    for array in inputs.values():
        if array.dtype.kind == "O":
            lengths = np.fromiter((len(value) for value in array.flat), np.int64, array.size)
            sizes += lengths.reshape(rows, -1).sum(axis=1)
        else:
            sizes += array.itemsize * int(np.prod(array.shape[1:]))
    return sizes


def slice_rows(pace, next_row_bytes, slice_seconds, max_rows):
    """Rows of the next slice: what `slice_seconds` allows at `pace`.

    Both the rows and the bytes `pace` ran in `pace.seconds` scale to the
    target, and the smaller estimate wins: rows longer than the pace's cost more
    by bytes, rows shorter cost no more than its rows did.

    Args:
        pace: a `Pace`, or None before any call (then one row, so a
            signature's very first call never runs long unchecked).
        next_row_bytes: (R,) bytes of the rows left, in order (R >= 1).
        slice_seconds: the time the slice should take (None: `max_rows` rows).
        max_rows: most rows of a slice.

    Returns:
        At least 1 and at most `max_rows`.
    """
    if slice_seconds is None:
        return max_rows
    if pace is None:
        return 1
    if pace.seconds <= 0:
        return max_rows
    rows = int(slice_seconds * pace.rows / pace.seconds)
    if pace.bytes > 0:
        budget = slice_seconds * pace.bytes / pace.seconds
        allowed = np.searchsorted(np.cumsum(next_row_bytes[:max_rows]), budget, side="right")
        rows = min(rows, int(allowed))
    return max(1, min(max_rows, rows))


def sliced_call(signature, inputs, max_rows, max_response_bytes=None, should_stop=None,
                slice_seconds=None):
    """Runs `signature` on `inputs` in slices of rows, stopping when told.

    A generator: each `next` runs one slice, `should_stop` asked first, and the
    call's outputs are its return value (`StopIteration.value`), so whoever
    drives it chooses when the next slice runs (`scheduling.SliceScheduler`
    interleaves them with other calls' slices). Each slice takes about
    `slice_seconds`: its rows come from the pace of the call's previous slice
    (`slice_rows`), the first slice's from the signature's latest call
    (`Signature.latest_pace`). A signature whose inputs have no batch dimension
    runs in one call.

    Args:
        signature: a `servable.Signature` (its `run`, `row_count` and
            `latest_pace`).
        inputs: checked inputs {name: (B, ...) array}.
        max_rows: most rows per slice.
        max_response_bytes: stop once the outputs hold more (None: no limit;
            a merged batch of several requests is checked request by request).
        should_stop: callable() -> True when the work is no longer wanted,
            asked before every slice, the first included.
        slice_seconds: the time one slice should take (None: `max_rows` rows
            a slice).

    Yields:
        None after each slice that leaves rows to run.

    Returns:
        dict {output name: array}, as one call of the whole request returns.

    Raises:
        ServingError: DEADLINE_EXCEEDED when stopped before a slice,
            RESOURCE_EXHAUSTED when the outputs pass `max_response_bytes`.
    """
    rows = signature.row_count(inputs)
    limit = float("inf") if max_response_bytes is None else max_response_bytes
    sizes = row_bytes(inputs, rows) if rows else None
    pace = signature.latest_pace
    parts, size, start = [], 0, 0
    while True:
        if should_stop is not None and should_stop():
            raise deadline_exceeded(
                f"Deadline Exceeded: stopped after {start} of {rows} rows" if start
                else "Deadline Exceeded before the model call started")
        step = None if not rows else slice_rows(pace, sizes[start:], slice_seconds, max_rows)
        if step is None or (not start and rows <= step):
            outputs = signature.run(inputs)
            check_response_bytes(signature.name, outputs, limit)
            return outputs
        step = min(step, rows - start)
        began = time.monotonic()
        part = signature.run({name: array[start:start + step] for name, array in inputs.items()})
        pace = Pace(time.monotonic() - began, step, int(sizes[start:start + step].sum()))
        start += step
        size += sum(array_bytes(array) for array in part.values())
        if size > limit:
            raise response_too_large(signature.name, size, limit, start, rows)
        parts.append(part)
        if start == rows:
            return _concatenate_outputs(parts)
        yield


def stopper(deadline, cancelled):
    """should_stop for `sliced_call`: the deadline (monotonic) passed, or `cancelled` is set."""
    return lambda: cancelled.is_set() or time.monotonic() >= deadline
