"""A model's threads shared slice by slice: a small call never waits for a large
one to end, large calls still finish with their rows in order, and a stopped call
runs no further slice."""

import threading

import numpy as np
import pytest

from keras_transformer.serving import budgets
from keras_transformer.serving import errors
from keras_transformer.serving import scheduling

WAIT = 30  # Seconds a test waits for an event that must come (a hang guard, not a timing).


class _LoggedSignature:
    """A stand-in signature: each call logs (label, rows) when it starts.

    A call waits on `gate` (when given) after logging, so a test can hold a slice
    on its thread; `running` is set once a call has started.
    """

    name = "logged"
    latest_pace = None

    def __init__(self, label, log, gate=None, on_run=None):
        self.label, self.log, self.gate, self.on_run = label, log, gate, on_run
        self.running = threading.Event()

    def row_count(self, inputs):
        return len(inputs["n"])

    def run(self, inputs):
        self.log.append((self.label, len(inputs["n"])))
        self.running.set()
        if self.gate is not None:
            assert self.gate.wait(WAIT)
        if self.on_run is not None:
            self.on_run()
        return {"twice": inputs["n"] * 2}


def _call(signature, rows, should_stop=None):
    """One-row slices (max_rows 1, no time target) of `rows` rows numbered 0.."""
    inputs = {"n": np.arange(rows)}
    return budgets.sliced_call(signature, inputs, 1, should_stop=should_stop)


@pytest.fixture
def scheduler():
    created = []

    def make(threads):
        created.append(scheduling.SliceScheduler(threads, "test"))
        return created[-1]

    yield make
    for each in created:
        each.shutdown()


@pytest.mark.parametrize("threads", [1, 2])
def test_a_one_row_call_runs_before_the_many_slice_calls_ahead_of_it_end(scheduler, threads):
    log, gate = [], threading.Event()
    run = scheduler(threads)
    bigs = [_LoggedSignature(f"big{i}", log, gate) for i in range(threads)]
    big_futures = [run.submit(_call(big, 20)) for big in bigs]
    for big in bigs:  # Every thread is inside a big call's first slice.
        assert big.running.wait(WAIT)
    small = run.submit(_call(_LoggedSignature("small", log), 1))
    gate.set()
    assert small.result(WAIT)["twice"].tolist() == [0]
    for future in big_futures:
        assert future.result(WAIT)["twice"].tolist() == list(range(0, 40, 2))
    # The small call's slice is the first a freed thread takes: at most one
    # second slice per other busy thread logs before it (first-in first-out
    # would run it after all 20 slices of every big call).
    labels = [label for label, _ in log]
    assert threads <= labels.index("small") <= 2 * threads - 1, labels
    assert all(rows == 1 for _, rows in log) and len(log) == 20 * threads + 1


def test_calls_take_turns_and_each_finishes_with_its_rows_in_order(scheduler):
    log, gate = [], threading.Event()
    run = scheduler(1)
    first = _LoggedSignature("a", log, gate)
    futures = [run.submit(_call(first, 5))]
    assert first.running.wait(WAIT)
    futures += [run.submit(_call(_LoggedSignature(label, log), rows))
                for label, rows in (("b", 3), ("c", 4))]
    gate.set()
    results = [future.result(WAIT)["twice"].tolist() for future in futures]
    assert results == [list(range(0, 10, 2)), [0, 2, 4], [0, 2, 4, 6]]
    # Round-robin, one slice a turn: no call starves while another has slices left.
    assert "".join(label for label, _ in log) == "abcabcabcaca"


def test_a_stopped_call_runs_no_further_slice_and_the_others_go_on(scheduler):
    log, stop = [], threading.Event()
    run = scheduler(1)
    # The stop comes while the call's second slice runs (as a deadline passing).
    stopped = _LoggedSignature("stopped", log,
                               on_run=lambda: len(log) >= 2 and stop.set())
    future = run.submit(_call(stopped, 50, should_stop=stop.is_set))
    other = run.submit(_call(_LoggedSignature("other", log), 3))
    with pytest.raises(errors.ServingError, match="stopped after 2 of 50 rows"):
        future.result(WAIT)
    assert other.result(WAIT)["twice"].tolist() == [0, 2, 4]
    assert [label for label, _ in log].count("stopped") == 2


def test_shutdown_cancels_calls_not_started_and_lets_started_ones_finish(scheduler):
    log, gate = [], threading.Event()
    run = scheduler(1)
    started = _LoggedSignature("started", log, gate)
    running = run.submit(_call(started, 3))
    assert started.running.wait(WAIT)
    waiting = run.submit(_call(_LoggedSignature("waiting", log), 2))
    run.shutdown()
    gate.set()
    assert running.result(WAIT)["twice"].tolist() == [0, 2, 4]
    assert waiting.cancelled() and "waiting" not in [label for label, _ in log]
    with pytest.raises(errors.ServingError, match="shutting down"):
        run.submit(_call(_LoggedSignature("late", log), 1))
