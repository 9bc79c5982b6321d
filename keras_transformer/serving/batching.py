"""Dynamic batching: merge concurrent requests into one model call.

Requests for the same signature wait in a queue; a batch thread takes the
oldest request and, until `batch_timeout_micros` has passed since it arrived
or `max_batch_size` rows are gathered, adds later ones. The batch's inputs are
concatenated along axis 0 (B), the signature runs once, and each request gets
its own rows of every output back. This is TF Serving's basic batch scheduler
in miniature; it only applies to signatures whose inputs and outputs all have
a batch dimension of -1 (see `Signature.batchable`).
"""

import collections
import concurrent.futures
import logging
import threading
import time

import numpy as np

from keras_transformer.serving import budgets
from keras_transformer.serving import errors

_log = logging.getLogger(__name__)


class _Task:
    __slots__ = ("inputs", "size", "future", "enqueued_at", "deadline", "cancelled")

    def __init__(self, inputs, size, deadline, cancelled):
        self.inputs = inputs
        self.size = size
        self.future = concurrent.futures.Future()
        self.enqueued_at = time.monotonic()
        self.deadline = deadline
        self.cancelled = cancelled

    def abandoned(self, now):
        return self.deadline <= now or (self.cancelled is not None and self.cancelled.is_set())


def _task_size(inputs):
    sizes = {array.shape[0] for array in inputs.values()}
    if len(sizes) != 1:
        raise errors.invalid_argument(
            "Batching Run() input tensors must have equal 0th-dimension size")
    return sizes.pop()


class BatchScheduler:
    """Queues requests for one signature and runs them in merged batches.

    Args:
        run_batch: callable(dict name -> array (B, ...), should_stop) -> dict
            name -> array (B, ...); called once per batch from a batch thread.
            `should_stop()` turns True once every request of the batch is past
            its deadline or cancelled (see `budgets.sliced_call`).
        options: a `config.BatchingOptions`.
        name: used in thread names and logs.
        on_batch: optional callable(batch_size), e.g. a metrics hook.

    Example:
        scheduler = BatchScheduler(signature.run, BatchingOptions(max_batch_size=8))
        rows = scheduler.submit({"text": np.array([b"hi"], object)}).result()

    where `run` is e.g. `lambda inputs, should_stop: signature.run(inputs)`.
    """

    def __init__(self, run_batch, options, name="batch", on_batch=None):
        self._run_batch = run_batch
        self._options = options
        self._on_batch = on_batch
        self._timeout = options.batch_timeout_micros / 1e6
        self._capacity_rows = options.max_enqueued_batches * options.max_batch_size
        self._queue = collections.deque()
        self._queued_rows = 0
        self._condition = threading.Condition()
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(options.num_batch_threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, inputs, deadline=None, cancelled=None):
        """Enqueues one request.

        Args:
            inputs: checked inputs, every array (B, ...) with the same B.
            deadline: monotonic time after which the request is dropped from
                the queue (DEADLINE_EXCEEDED) instead of run; None: never.
            cancelled: optional `threading.Event` set when the client left.

        Returns:
            A `concurrent.futures.Future` resolving to this request's outputs.

        Raises:
            ServingError: INVALID_ARGUMENT for a request larger than
                max_batch_size or with unequal batch sizes; UNAVAILABLE when
                the queue is full or the scheduler is stopped.
        """
        size = _task_size(inputs)
        if size > self._options.max_batch_size:
            raise errors.invalid_argument(
                f"Task size {size} is larger than maximum input batch size "
                f"{self._options.max_batch_size}")
        task = _Task(inputs, size, float("inf") if deadline is None else deadline, cancelled)
        with self._condition:
            if self._stopping:
                raise errors.ServingError("UNAVAILABLE", "Batch scheduler is shutting down")
            if self._queued_rows + size > self._capacity_rows:
                raise errors.ServingError(
                    "UNAVAILABLE",
                    "The batch scheduling queue to which this task was submitted is full")
            self._queue.append(task)
            self._queued_rows += size
            self._condition.notify_all()
        return task.future

    def stop(self):
        """Stops taking requests; queued ones still run. Does not block."""
        with self._condition:
            self._stopping = True
            self._condition.notify_all()

    # ------------------------------------------------------------ batch threads

    def _mergeable(self, first, other):
        for name, array in first.inputs.items():
            other_array = other.inputs[name]
            if array.dtype != other_array.dtype or array.ndim != other_array.ndim:
                return False
            padding = self._options.pad_variable_length_inputs
            if array.shape[1:] != other_array.shape[1:] and not padding:
                return False
        return True

    def _plan(self):
        """How many queued tasks the next batch takes, and whether it is closed."""
        first = self._queue[0]
        rows, count = 0, 0
        for task in self._queue:
            if rows + task.size > self._options.max_batch_size or not self._mergeable(first, task):
                return count, True
            rows += task.size
            count += 1
        return count, rows >= self._options.max_batch_size

    def _next_batch(self):
        with self._condition:
            while True:
                if not self._queue:
                    if self._stopping:
                        return None
                    self._condition.wait()
                    continue
                count, closed = self._plan()
                remaining = self._queue[0].enqueued_at + self._timeout - time.monotonic()
                if closed or remaining <= 0 or self._stopping:
                    batch = [self._queue.popleft() for _ in range(count)]
                    self._queued_rows -= sum(task.size for task in batch)
                    return batch
                self._condition.wait(remaining)

    def _work(self):
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            # Requests whose client gave up, or whose deadline passed, before the
            # batch ran are dropped: they never reach the model.
            now = time.monotonic()
            batch = [task for task in batch if task.future.set_running_or_notify_cancel()]
            for task in batch:
                if task.abandoned(now):
                    task.future.set_exception(errors.ServingError(
                        "DEADLINE_EXCEEDED", "Deadline Exceeded before the batch started"))
            batch = [task for task in batch if not task.future.done()]
            if batch:
                self._process(batch)

    def _process(self, batch):
        try:
            should_stop = lambda: all(task.abandoned(time.monotonic())  # noqa: E731
                                      for task in batch)
            if len(batch) == 1:
                results = [self._run(batch[0].inputs, batch[0].size, should_stop)]
            else:
                results = self._run_merged(batch, should_stop)
        except Exception as error:  # Delivered to every waiting request.
            failure = errors.from_exception(error)
            for task in batch:
                task.future.set_exception(failure)
            return
        for task, result in zip(batch, results):
            task.future.set_result(result)

    def _run(self, inputs, size, should_stop):
        if self._on_batch is not None:
            self._on_batch(size)
        return self._run_batch(inputs, should_stop)

    def _run_merged(self, batch, should_stop):
        sizes = [task.size for task in batch]
        total = sum(sizes)
        padded_total = self._padded_size(total)
        merged = {}
        for name in batch[0].inputs:
            arrays = budgets.pad_to_common_shape([task.inputs[name] for task in batch])
            if padded_total > total:  # Fill up to an allowed batch size.
                filler = np.repeat(arrays[0][:1], padded_total - total, axis=0)
                arrays.append(filler)
            merged[name] = np.concatenate(arrays, axis=0)
        outputs = self._run(merged, padded_total, should_stop)
        if any(np.ndim(value) == 0 or np.shape(value)[0] != padded_total
               for value in outputs.values()):
            # An output without a batch dimension cannot be split: run alone.
            _log.warning("Batched outputs are not split along axis 0; running requests one by one")
            return [self._run(task.inputs, task.size, should_stop) for task in batch]
        results, offset = [], 0
        for size in sizes:
            results.append({name: value[offset:offset + size] for name, value in outputs.items()})
            offset += size
        return results

    def _padded_size(self, total):
        for allowed in self._options.allowed_batch_sizes:
            if allowed >= total:
                return allowed
        return total
