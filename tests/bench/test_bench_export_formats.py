"""`python -m bench export --run DIR` measures each format alone: two models' thread
pools in one process (TensorFlow's, CTranslate2's OpenMP threads) change each
other's times."""

import pytest

from bench import export
from bench.common import Results

SAVED_MODELS = ("SavedModel float32, greedy", "SavedModel float32, beam 4")
CTRANSLATE2 = ("CTranslate2 int8, greedy", "CTranslate2 int8, beam 4")


class _Folder:
    config = {"data": {"target_language": "en"}}

    def __init__(self, path):
        self.path = path

    def read_split(self, part):
        return ["你好。", "谢谢。"], ["Hello.", "Thanks."]


@pytest.fixture(params=[True, False], ids=["quick", "two passes"])
def measured_groups(monkeypatch, request):
    """Runs `_run_formats` on stand-in formats; returns (groups measured, results)."""
    quick = request.param
    groups, calls = [], [0]

    def export_formats(folder, run_dir, xla_modes):
        return {name: {"kind": "savedmodel" if name.startswith("SavedModel") else "ctranslate2",
                       "path": name, "beam": 1 if name.endswith("greedy") else 4,
                       "megabytes": 1.0, "export_seconds": 2.0}
                for name in SAVED_MODELS + CTRANSLATE2}

    def measure_alone(formats, threads, bleu_sources, profile, **timing):
        calls[0] += 1
        groups.append({"names": list(formats),
                       "kinds": {spec["kind"] for spec in formats.values()},
                       "threads": dict(threads), "bleu_sources": list(bleu_sources),
                       "profile": profile})
        # Later passes are faster: the reported times must be theirs.
        return {name: {"p50": 0.01 / calls[0], "p99": 0.02 / calls[0],
                       "batch32": 0.1 / calls[0],
                       "op_times": {batch: {"all op types": 2.0, "MatMul": 1.0}
                                    for batch in ("batch 1", "batch 32")}
                       if profile and formats[name]["kind"] == "savedmodel" else {},
                       "hypotheses": ["Hello.", "Thanks."] if bleu_sources else []}
                for name in formats}

    monkeypatch.setattr(export, "_export_formats", export_formats)
    monkeypatch.setattr(export, "_measure_alone", measure_alone)
    monkeypatch.setattr("keras_transformer.runs.folder.RunFolder", _Folder)
    results = Results({"intra_op_threads": 0, "inter_op_threads": 0})
    export._run_formats(results, "runs/x", quick=quick, xla_modes=(False,))
    return groups, results


def test_each_format_is_measured_in_a_process_of_its_own(measured_groups):
    groups, _ = measured_groups
    assert all(len(group["names"]) == 1 for group in groups)
    timed_with_bleu = [group["names"][0] for group in groups if group["bleu_sources"]]
    assert sorted(timed_with_bleu) == sorted(SAVED_MODELS + CTRANSLATE2)


def test_the_saved_models_are_timed_again_with_one_thread_per_op(measured_groups):
    groups, results = measured_groups
    threads = {group["names"][0]: group["threads"]["intra_op_threads"] for group in groups}
    for name in SAVED_MODELS:
        assert threads[name] == 0 and threads[f"{name}, {export.ONE_THREAD_PER_OP}"] == 1
    assert all(group["threads"]["intra_op_threads"] == 0 for group in groups
               if group["kinds"] == {"ctranslate2"})
    # Only times again: the outputs, so BLEU and size, do not depend on the threads.
    again = [group for group in groups if group["threads"]["intra_op_threads"] == 1]
    assert {group["names"][0] for group in again} == {
        f"{name}, {export.ONE_THREAD_PER_OP}" for name in SAVED_MODELS}
    assert all(group["bleu_sources"] == [] and not group["profile"] for group in again)
    metrics = [row["metric"] for row in results.rows]
    for name in SAVED_MODELS:
        threaded = f"{name}, {export.ONE_THREAD_PER_OP}"
        assert f"{threaded}: sentences/s" in metrics
        assert f"{threaded}: latency p50" in metrics
        assert f"{threaded}: BLEU" not in metrics and f"{name}: BLEU" in metrics


def test_rows_compare_with_ctranslate2_int8_of_the_same_search(measured_groups):
    _, results = measured_groups
    baselines = {row["metric"]: row["baseline"] for row in results.rows
                 if row["metric"].endswith("sentences/s")}
    for name, baseline in baselines.items():
        search = "greedy" if "greedy" in name else "beam 4"
        expected = None if name.startswith("CTranslate2 int8") else f"CTranslate2 int8, {search}"
        assert baseline == expected, name


def test_without_quick_each_time_is_the_faster_of_two_passes(measured_groups):
    groups, results = measured_groups
    names = [group["names"][0] for group in groups]
    passes = max(names.count(name) for name in names)
    assert all(names.count(name) == passes for name in names)
    if passes == 1:
        return  # --quick
    assert passes == 2
    last = {group["names"][0]: index + 1 for index, group in enumerate(groups)}
    rows = {row["metric"]: row["value"] for row in results.rows}
    for name, call in last.items():
        assert rows[f"{name}: latency p50"] == pytest.approx(0.01 / call * 1e3)
        assert rows[f"{name}: sentences/s"] == pytest.approx(32 / (0.1 / call))


def test_an_xla_exports_first_calls_are_timed_one_text_each_and_reported():
    called = []
    numbers = export._first_calls(lambda texts: called.append(list(texts)), ["a", "bb", "ccc"])
    assert called == [["a"], ["bb"], ["ccc"]]  # each text alone, once, no untimed call first
    assert 0 <= numbers["cold_p50"] <= numbers["cold_max"]
    results = Results()
    export._add_first_call_rows(results, "case", "SavedModel float32, XLA, greedy", numbers)
    export._add_first_call_rows(results, "case", "SavedModel float32, greedy", {"p50": 1.0})
    metrics = [row["metric"] for row in results.rows]
    assert metrics == [f"SavedModel float32, XLA, greedy: latency {m} before every source width "
                       "was seen" for m in ("p50", "max")]


def test_each_saved_model_is_profiled_once_at_batch_1_and_32(measured_groups):
    _, results = measured_groups
    profiled = {(row["case"].split(", ", 1)[1], row["metric"]) for row in results.rows
                if row["case"].endswith("kernel time per op type")}
    assert profiled == {(f"{batch}, kernel time per op type", f"{name}: {op_type}")
                        for batch in ("batch 1", "batch 32") for name in SAVED_MODELS
                        for op_type in ("all op types", "MatMul")}


def test_each_format_reports_the_time_its_export_took_once(measured_groups):
    _, results = measured_groups
    rows = [row for row in results.rows if row["metric"].endswith(": export")]
    assert sorted(row["metric"] for row in rows) == sorted(
        f"{name}: export" for name in SAVED_MODELS + CTRANSLATE2)
    assert all(row["value"] == 2.0 and row["unit"] == "s" for row in rows)
