"""A model's threads shared between requests slice by slice, in turn.

Every model call runs as slices (`budgets.sliced_call`, a generator that runs
one slice per `next`). A `SliceScheduler` holds a model's threads and one queue
of calls waiting for their next slice: a free thread takes the call at the head,
runs one slice of it, and puts it back at the tail unless it has finished. Calls
thus take turns, as TF Serving's batch scheduler splits large batches and
interleaves them: a request waits for at most one slice of each request ahead of
it, however many slices those have left, and every request progresses by one
slice a round (none starves). A call's slices run one after another, never two
at once, so its outputs are assembled in order; its deadline and client-left
check stays before every slice (`budgets.sliced_call`).

Bound: with R calls in flight on a model of T threads, a new call starts within
about ceil(R / T) slices (R <= T: within one), and each slice takes about
`--model_call_slice_in_ms`.
"""

import collections
import concurrent.futures
import threading

from keras_transformer.serving import errors


class _Call:
    __slots__ = ("steps", "future", "started")

    def __init__(self, steps):
        self.steps = steps
        self.future = concurrent.futures.Future()
        self.started = False


class SliceScheduler:
    """Runs calls' slices on `num_threads` threads, round-robin across calls.

    Args:
        num_threads: the threads (how many slices run at once).
        name: the threads' name prefix.

    Example:
        scheduler = SliceScheduler(2, "model-zh_en")
        outputs = scheduler.submit(budgets.sliced_call(signature, inputs, 8)).result()
    """

    def __init__(self, num_threads, name="slices"):
        self._waiting = collections.deque()  # Calls whose next slice may run, in turn.
        self._condition = threading.Condition()
        self._stopping = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(num_threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, steps):
        """Queues a call behind the calls already waiting for a slice.

        Args:
            steps: a generator that runs one slice per `next` and returns the
                call's result (`budgets.sliced_call`).

        Returns:
            A `concurrent.futures.Future` of that result. Cancelling it before
            its first slice keeps the call from ever running.

        Raises:
            ServingError: UNAVAILABLE once the scheduler is shut down.
        """
        call = _Call(steps)
        with self._condition:
            if self._stopping:
                raise errors.ServingError("UNAVAILABLE", "The server is shutting down")
            self._waiting.append(call)
            self._condition.notify()
        return call.future

    def shutdown(self):
        """Cancels the calls that have not started; started ones run to their end."""
        with self._condition:
            self._stopping = True
            for call in [call for call in self._waiting if not call.started]:
                self._waiting.remove(call)
                call.future.cancel()
            self._condition.notify_all()

    def _next_call(self):
        with self._condition:
            while not self._waiting:
                if self._stopping:
                    return None
                self._condition.wait()
            return self._waiting.popleft()

    def _work(self):
        while True:
            call = self._next_call()
            if call is None:
                return
            if not call.started:
                if not call.future.set_running_or_notify_cancel():
                    continue  # Its client left before the first slice.
                call.started = True
            try:
                next(call.steps)
            except StopIteration as finished:
                call.future.set_result(finished.value)
                continue
            except BaseException as error:  # Delivered to the waiting request.
                call.future.set_exception(error)
                continue
            with self._condition:
                self._waiting.append(call)
                self._condition.notify()
