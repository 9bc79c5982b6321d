"""Small batches are timed over more interleaved rounds: their calls are short, and
a few seconds of a drifting VM make a noisy ratio."""

import importlib
from unittest import mock

import pytest

from bench.common import Results
from bench.common import rounds_for_batch


def test_rounds_grow_as_the_batch_shrinks_up_to_the_cap():
    assert rounds_for_batch(32, 5) == 5
    assert rounds_for_batch(64, 5) == 5
    assert rounds_for_batch(16, 5) == 10
    assert rounds_for_batch(1, 5) == 25  # capped at 5x, not 32x
    assert rounds_for_batch(1, 3) == 15
    counts = [rounds_for_batch(batch, 5) for batch in range(1, 65)]
    assert counts == sorted(counts, reverse=True)


@pytest.mark.parametrize("module", ["decoding", "generation"])
def test_the_speed_benchmarks_time_batch_1_over_more_rounds(module):
    benchmark = importlib.import_module(f"bench.{module}")
    rounds = []

    def fake_timing(functions, warmup=1, repeats=5):
        rounds.append(repeats)
        return [1.0] * len(functions)

    results = Results({"preset": "tiny", "xla": "off"})
    with mock.patch.object(benchmark, "time_interleaved", fake_timing):
        benchmark.run(results, quick=True, new_tokens=4, batch_sizes=(1, 32))
    # Decoding then times searches that drop done rows against ones that keep them,
    # greedy and beam 4, at batch 32.
    extra = 2 if module == "decoding" else 0
    assert rounds == [rounds_for_batch(1, 3)] + [rounds_for_batch(32, 3)] * (1 + extra)
    assert rounds[0] > rounds[1]
    dropping = [row for row in results.rows if "done rows dropped" in row["metric"]]
    assert len(dropping) == 2 * extra  # rows ending at spread steps and all together
