"""The exported translator as TF Serving runs it, beside the tutorial's exported one.

Both are SavedModels with a `serving_default` signature that takes strings and
returns strings (tokenization, the decoding loop and detokenization inside the
graph), loaded with `tf.saved_model.load` in a fresh process that imports only
TensorFlow and tensorflow-text (what TF Serving has), and called through that
signature, in graph mode unless the export was made with XLA.

- **ours**: `TranslationModule` written by `write_export`, greedy and beam 4, the
  cached search (`SequenceSearch`), with and without `jit_compile` (the `export
  --xla` option) when the command line's `--xla` allows.
- **tutorial**: the TensorFlow tutorial's `ExportTranslator`: a `tf.Module` whose one
  `tf.function` `__call__` tokenizes, runs the uncached greedy loop (the whole model
  on the whole prefix at every step: `make_uncached_greedy`) and detokenizes, saved
  with `tf.saved_model.save`, that function named `serving_default`. Two
  changes, both in its favour or neutral: it takes a batch of strings (the tutorial's
  takes one, so batch 32 would be 32 calls), and it skips the tutorial's extra full
  pass that recomputes the attention weights for plotting.

Same model and weights for all (the preset's, random), the benchmark's SentencePiece
models, and a fixed amount of work: an end token outside the vocabulary makes every
row decode exactly `new_tokens` tokens, as in `bench.decoding`. Each model runs alone
in a fresh process of its own (see Formats below for why). Latency at batch 1: one
sentence per call for `rounds` rounds (different sentences, the same for every
model), p50/p99 of the calls; XLA exports are first called once with each of those
sentences (a new source width, `static_widths`, is a new shape, which XLA compiles:
reported as its own row), then timed warm. Throughput at batch 32: 32 sentences per call,
sentences/s of the median call. Ratios are against the tutorial's exported
translator.

**Formats** (`--run DIR`, a trained translator run; else runs/zh-en when it exists):
the run's weights as float32, int8 and bfloat16 SavedModels (`export --quantize`),
in graph mode and with XLA when `--xla` allows, and as CTranslate2 float32 and int8
folders (`export --format ctranslate2`), each greedy and beam 4 (α and β the
export's defaults, CTranslate2 given the same): batch-1 latency (p50, p99) and
batch-32 sentences/s on the run's test sentences; size on disk (a SavedModel's graph
and variables, a CTranslate2 folder's model); the seconds each export took (in one
process, one after the other); BLEU of the test split (the first 64 sentences with
--quick); for each SavedModel, the kernel time of a batch-1 call (the mean of 5) and
of a batch-32 call per op type (`tf.profiler`: all op types together and the most
costly ones), which shows where a format gains or loses.

Each format runs alone, in a fresh process of its own: models of two engines in one
process, or two CTranslate2 models, change each other's times (their idle threads
keep spinning on the cores the other needs: CTranslate2 float32 greedy at batch 1
took 14.5 ms beside its int8 model and 4.9 ms alone). Every format is measured in
two passes, in turn (one with --quick), and each time is the faster pass's: a
format's process has the machine to itself, and the passes spread a change in the
machine's speed over all formats. The SavedModels run twice,
with the command line's thread options (TensorFlow's choice by default) and with
one thread per op (TF Serving's `--tensorflow_intra_op_parallelism=1`);
CTranslate2 runs with as many threads as the machine has cores, its own best
setting. Ratios are against CTranslate2 int8, the fastest CPU
engine's usual setting.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

NEVER = 10**6  # an end token outside the vocabulary


def _tutorial_translator(model, source_tokenizer, target_tokenizer, new_tokens):
    """The tutorial's `ExportTranslator` over its uncached loop."""
    import tensorflow as tf

    from keras_transformer.constants import PAD_ID
    from bench.uncached import make_uncached_greedy

    class ExportTranslator(tf.Module):
        def __init__(self):
            super().__init__()
            self.source_tokenizer = source_tokenizer
            self.target_tokenizer = target_tokenizer
            self._setattr_tracking = False  # as TranslationModule: variables below
            self.decode = make_uncached_greedy(model, max_length=new_tokens, eos_id=NEVER)
            self._setattr_tracking = True

        def track_variables(self):
            """Tracks the variables the function reads (the model is not tracked)."""
            self.model_variables = list(self.__call__.get_concrete_function().variables)
            return self

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, sentence):
            ids = self.source_tokenizer.tokenize(sentence).to_tensor(default_value=PAD_ID)
            return {"translation": self.target_tokenizer.detokenize(self.decode(ids))}

    return ExportTranslator().track_variables()


def _export_all(folder, preset, new_tokens, xla_modes):
    """Writes every SavedModel; returns {name: (path, input name)}."""
    import keras
    import tensorflow as tf

    from bench.training import corpus_and_tokenizers
    from keras_transformer.decoding import SequenceSearch
    from keras_transformer.export import TranslationModule
    from keras_transformer.export import write_export
    from keras_transformer.models import build_transformer

    _, _, source, target = corpus_and_tokenizers()
    keras.utils.set_random_seed(0)
    model = build_transformer(preset, source_vocab_size=source.vocab_size,
                              target_vocab_size=target.vocab_size)
    exports = {}
    for jit in xla_modes:
        for beam in (1, 4):
            module = TranslationModule(model, source, target, max_source_length=64,
                                       beam_width=beam, max_output_length=new_tokens,
                                       jit_compile=jit)
            # Fixed work: the same search, with an end token the model never produces.
            module.search = SequenceSearch(model, max_length=new_tokens, beam_width=beam,
                                           eos_id=NEVER, jit_compile=jit)
            name = ("greedy" if beam == 1 else "beam 4") + (", XLA" if jit else "")
            path = write_export(module, folder, f"ours{len(exports)}", version=1)
            exports[f"ours, {name}"] = (path, "text")
    path = os.path.join(folder, "tutorial")
    translator = _tutorial_translator(model, source, target, new_tokens)
    # The tutorial saves without naming a signature; TF Serving needs serving_default.
    tf.saved_model.save(translator, path,
                        signatures={"serving_default": translator.__call__.get_concrete_function()})
    exports["tutorial"] = (path, "sentence")
    return exports


def _first_calls(call, texts):
    """An XLA export's first calls, one per text alone, timed from the process's
    first: each new source width (`static_widths`) compiles, as in a server without
    warmup requests.

    Returns:
        {"cold_p50", "cold_max"} in seconds.
    """
    import numpy as np

    from bench.common import time_interleaved

    times = time_interleaved([lambda text=text: call([text]) for text in texts], warmup=0,
                             repeats=1)
    return {"cold_p50": float(np.percentile(times, 50)), "cold_max": float(np.max(times))}


def _add_first_call_rows(results, case, name, numbers):
    """The `_first_calls` rows of an XLA export (none for another)."""
    for metric in ("p50", "max"):
        if f"cold_{metric}" in numbers:
            results.add("export", case, f"{name}: latency {metric} before every source width "
                        "was seen", numbers[f"cold_{metric}"] * 1e3, "ms")


def _measure(exports, sentences, rounds, batch_rounds):
    """In a fresh process: per model, batch-1 call times and batch-32 call times."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    from bench.common import time_interleaved

    loaded = {name: (tf.saved_model.load(path), key) for name, (path, key) in exports.items()}

    def caller(name, texts):
        model, key = loaded[name]
        function = model.signatures["serving_default"]
        batch = tf.constant(texts)
        return lambda: [value.numpy() for value in function(**{key: batch}).values()]

    names = list(loaded)
    latency = {name: [] for name in names}
    cold = {name: _first_calls(lambda texts, n=name: caller(n, texts)(), sentences[:rounds])
            for name in names if "XLA" in name}
    for name in names:  # first calls (graph set-up, XLA compilation) untimed
        caller(name, sentences[:1])()
        caller(name, sentences[:32])()
    for round_index in range(rounds):
        text = [sentences[round_index % len(sentences)]]
        times = time_interleaved([caller(name, text) for name in names], warmup=0, repeats=1)
        for name, seconds in zip(names, times):
            latency[name].append(seconds)
    batch32 = time_interleaved([caller(name, sentences[:32]) for name in names], warmup=0,
                               repeats=batch_rounds)
    return {
        name: {"p50": float(np.percentile(latency[name], 50)),
               "p99": float(np.percentile(latency[name], 99)),
               "batch32": seconds, **cold.get(name, {})}
        for name, seconds in zip(names, batch32)
    }


FORMAT_QUANTIZATIONS = ("none", "int8", "bfloat16")
CTRANSLATE2_TYPES = ("float32", "int8")
HEADLINE = "CTranslate2 int8"
PROFILED_OPS = 6  # op types reported per SavedModel format
DEMO_RUN = os.path.join("runs", "zh-en")


def _folder_size(path):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def _export_formats(folder, run_dir, xla_modes):
    """Every format of the run: {name: {"kind", "path", "beam", "megabytes",
    "export_seconds"}}."""
    from keras_transformer.export.command import export_ctranslate2
    from keras_transformer.export.command import export_run

    formats = {}
    for quantize in FORMAT_QUANTIZATIONS:
        for jit in xla_modes:
            for beam in (1, 4):
                started = time.perf_counter()
                path = export_run(run_dir, f"m{len(formats)}", base=folder, beam=beam,
                                  xla=jit, quantize=quantize)
                seconds = time.perf_counter() - started
                label = "float32" if quantize == "none" else quantize
                name = f"SavedModel {label}{', XLA' if jit else ''}, " + (
                    "greedy" if beam == 1 else "beam 4")
                # What a server reads: the graph and its variables (not the tokenizer assets
                # or the preset kept for fine-tuning).
                size = _folder_size(path) - sum(
                    _folder_size(os.path.join(path, part)) for part in ("assets", "preset"))
                formats[name] = {"kind": "savedmodel", "path": path, "beam": beam,
                                 "megabytes": size / 1e6, "export_seconds": seconds}
    for quantization in CTRANSLATE2_TYPES:
        started = time.perf_counter()
        path = export_ctranslate2(run_dir, "ct2", base=folder, quantization=quantization)
        seconds = time.perf_counter() - started
        size = _folder_size(path) - sum(
            os.path.getsize(os.path.join(path, name)) for name in ("source.model", "target.model"))
        for beam in (1, 4):
            name = f"CTranslate2 {quantization}, " + ("greedy" if beam == 1 else "beam 4")
            formats[name] = {"kind": "ctranslate2", "path": path, "beam": beam,
                             "megabytes": size / 1e6, "export_seconds": seconds}
    return formats


def _measure_formats(formats, sentences, bleu_sources, rounds, batch_rounds, profile):
    """In a fresh process: per format, batch-1 and batch-32 call times, and the
    translations of `bleu_sources` (batches of 32) and, with `profile`, a
    SavedModel's kernel time per op type."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    from bench.common import time_interleaved
    from bench.profile import kernel_times
    from keras_transformer.evaluation.translators import CTranslate2Translator

    translators = {}
    for name, spec in formats.items():
        if spec["kind"] == "savedmodel":
            function = tf.saved_model.load(spec["path"]).signatures["serving_default"]
            translators[name] = (lambda texts, function=function: [
                t.decode() for t in function(text=tf.constant(texts))["translation"].numpy()])
        else:
            translator = CTranslate2Translator(spec["path"], beam_width=spec["beam"],
                                               intra_threads=os.cpu_count())
            translators[name] = (lambda texts, translator=translator: [
                row[0] for row in translator(texts)[0]])
    names = list(translators)
    cold = {name: _first_calls(translators[name], sentences[:rounds])
            for name in names if "XLA" in name}
    for name in names:  # first calls (graph set-up, XLA compilation) untimed
        translators[name](sentences[:1])
        translators[name](sentences[:32])
    latency = {name: [] for name in names}
    for round_index in range(rounds):
        text = [sentences[round_index % len(sentences)]]
        times = time_interleaved([lambda n=name: translators[n](text) for name in names],
                                 warmup=0, repeats=1)
        for name, seconds in zip(names, times):
            latency[name].append(seconds)
    batch32 = time_interleaved([lambda n=name: translators[n](sentences[:32]) for name in names],
                               warmup=0, repeats=batch_rounds)
    measured = {}
    for name, seconds in zip(names, batch32):
        # Where a call's time goes, per op type (a SavedModel runs TensorFlow kernels
        # the profiler sees; CTranslate2's are its own); a batch-1 call is short, so
        # its kernel times are averaged over several.
        op_times = {}
        if profile and formats[name]["kind"] == "savedmodel":
            for batch, texts, calls in (("batch 1", sentences[:1], 5),
                                        ("batch 32", sentences[:32], 1)):
                totals = kernel_times(lambda n=name, t=texts: translators[n](t), calls=calls)
                op_times[batch] = {"all op types": sum(totals.values()),
                                   **dict(totals.most_common(PROFILED_OPS))}
        hypotheses = []
        for start in range(0, len(bleu_sources), 32):
            hypotheses += translators[name](bleu_sources[start : start + 32])
        measured[name] = {"p50": float(np.percentile(latency[name], 50)),
                          "p99": float(np.percentile(latency[name], 99)),
                          "batch32": seconds, "hypotheses": hypotheses, "op_times": op_times,
                          **cold.get(name, {})}
    return measured


def _in_fresh_process(job, *arguments):
    """Runs this module's measuring entry point (`python -m bench.export [formats]`)
    on `job` in a fresh process, as a server that loads its models and nothing else;
    returns the measurements it prints."""
    completed = subprocess.run(
        [sys.executable, "-m", "bench.export", *arguments], input=json.dumps(job),
        text=True, capture_output=True, check=False,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the measuring process failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _measure_alone(formats, threads, **job):
    """`_measure_formats` in a fresh process that sets TensorFlow's `threads`
    (`THREAD_POOLS` keys) first; returns its measurements."""
    return _in_fresh_process({"formats": formats, **job, **threads}, "formats")


ONE_THREAD_PER_OP = "one thread per op"


def _run_formats(results, run_dir, quick, xla_modes):
    from bench.common import THREAD_POOLS
    from keras_transformer.evaluation.scoring import bleu_tokenizer_for
    from keras_transformer.evaluation.scoring import score
    from keras_transformer.runs.folder import RunFolder

    run_folder = RunFolder(run_dir)
    sources, references = run_folder.read_split("test")
    if quick:
        sources, references = sources[:64], references[:64]
    sentences = [text for text in sources if text][:64]
    rounds, batch_rounds = (8, 1) if quick else (30, 3)
    passes = 1 if quick else 2
    threads = {name: results.options.get(name, 0) for name in THREAD_POOLS}
    timing = {"sentences": sentences, "rounds": rounds, "batch_rounds": batch_rounds}
    with tempfile.TemporaryDirectory(prefix="bench-formats-") as folder:
        formats = _export_formats(folder, run_dir, xla_modes)
        measured = {}
        if threads["intra_op_threads"] != 1:
            # The SavedModels again, as a server runs them with one thread per op: their
            # outputs are the same, so only their times are measured.
            formats.update({f"{name}, {ONE_THREAD_PER_OP}": spec
                            for name, spec in formats.items() if spec["kind"] == "savedmodel"})
        for pass_index in range(passes):
            for name, spec in formats.items():
                first = pass_index == 0 and not name.endswith(ONE_THREAD_PER_OP)
                numbers = _measure_alone(
                    {name: spec},
                    {**threads, "intra_op_threads": 1} if name.endswith(ONE_THREAD_PER_OP)
                    else threads,
                    bleu_sources=sources if first else [], profile=first, **timing)[name]
                if name not in measured:
                    measured[name] = {**numbers, "hypotheses": numbers["hypotheses"] if first
                                      else None}
                for metric in ("p50", "p99", "batch32"):  # the faster pass
                    measured[name][metric] = min(measured[name][metric], numbers[metric])
    tokenize = bleu_tokenizer_for(run_folder.config["data"].get("target_language"))
    label = f"{os.path.basename(os.path.normpath(run_dir))} formats"
    for name, numbers in measured.items():
        hypotheses = numbers.pop("hypotheses")
        if hypotheses is not None:  # a format's BLEU and size once, not per thread setting
            numbers["bleu"] = score(hypotheses, references, tokenize=tokenize).bleu
            numbers["megabytes"] = formats[name]["megabytes"]
    for name, numbers in measured.items():
        search = "greedy" if formats[name]["beam"] == 1 else "beam 4"
        headline = measured[f"{HEADLINE}, {search}"]
        vs = None if name.startswith(HEADLINE) else f"{HEADLINE}, {search}"
        for metric in ("p50", "p99"):
            results.add("export", f"{label}, batch 1", f"{name}: latency {metric}",
                        numbers[metric] * 1e3, "ms",
                        ratio=None if vs is None else headline[metric] / numbers[metric],
                        baseline=vs)
        _add_first_call_rows(results, f"{label}, batch 1", name, numbers)
        results.add("export", f"{label}, batch 32", f"{name}: sentences/s",
                    32 / numbers["batch32"], "sent/s",
                    ratio=None if vs is None else headline["batch32"] / numbers["batch32"],
                    baseline=vs)
        if "bleu" in numbers:
            results.add("export", f"{label}, test split ({len(sources)} sentences)",
                        f"{name}: BLEU", numbers["bleu"], "BLEU")
            results.add("export", f"{label}, size on disk", f"{name}: size",
                        numbers["megabytes"], "MB")
            # The whole command's work, in one process in the order above: the first
            # export also pays that process's one-time tracing set-up.
            results.add("export", f"{label}, time to export", f"{name}: export",
                        formats[name]["export_seconds"], "s")
        for batch, op_times in numbers.pop("op_times").items():
            for op_type, milliseconds in op_times.items():
                results.add("export", f"{label}, {batch}, kernel time per op type",
                            f"{name}: {op_type}", milliseconds, "ms per call")
    results.context["export_formats"] = {"run": os.path.abspath(run_dir), **measured}


def run(results, quick=False, new_tokens=32):
    from bench.common import jit_modes

    run_dir = results.options.get("run") or (DEMO_RUN if os.path.isdir(DEMO_RUN) else None)
    if run_dir:
        _run_formats(results, run_dir, quick, jit_modes(results.options, default="off"))
    else:
        print("  export formats: skipped (no --run DIR, and no runs/zh-en)", flush=True)
    _run_tutorial_comparison(results, quick, new_tokens)


def _run_tutorial_comparison(results, quick, new_tokens):
    from bench.common import THREAD_POOLS
    from bench.common import jit_modes
    from bench.training import corpus_and_tokenizers

    options = results.options
    preset = options.get("preset", "small")
    xla_modes = jit_modes(options, default="off")
    rounds, batch_rounds = (8, 1) if quick else (30, 3)
    sources = corpus_and_tokenizers()[0]
    sentences = [text for text in sources[::97] if text][:64]
    with tempfile.TemporaryDirectory(prefix="bench-export-") as folder:
        exports = _export_all(folder, preset, new_tokens, xla_modes)
        measured = {}
        for name, export in exports.items():
            # A fresh process for each, as a server that loads that SavedModel and
            # nothing else (models side by side in one process change each other's times).
            measured.update(_in_fresh_process({
                "exports": {name: export}, "sentences": sentences, "rounds": rounds,
                "batch_rounds": batch_rounds,
                **{pool: options.get(pool, 0) for pool in THREAD_POOLS}}))
    baseline = measured["tutorial"]
    label = f"{preset}, {new_tokens} tokens, serving_default"
    for name, numbers in measured.items():
        mode = "tutorial's exported Translator (uncached)" if name == "tutorial" else name
        vs = None if name == "tutorial" else "tutorial's exported translator"
        for metric in ("p50", "p99"):
            ratio = None if vs is None else baseline[metric] / numbers[metric]
            results.add("export", f"{label}, batch 1", f"{mode}: latency {metric}",
                        numbers[metric] * 1e3, "ms", ratio=ratio, baseline=vs)
        _add_first_call_rows(results, f"{label}, batch 1", mode, numbers)
        ratio = None if vs is None else baseline["batch32"] / numbers["batch32"]
        results.add("export", f"{label}, batch 32", f"{mode}: sentences/s",
                    32 / numbers["batch32"], "sent/s", ratio=ratio, baseline=vs)
    results.context["export"] = measured


if __name__ == "__main__":
    job = json.loads(sys.stdin.read())
    from bench.common import use_threads

    use_threads(job)  # as a server's flags set them
    if sys.argv[1:] == ["formats"]:
        print(json.dumps(_measure_formats(job["formats"], job["sentences"],
                                          job["bleu_sources"], job["rounds"],
                                          job["batch_rounds"], job["profile"])))
    else:
        print(json.dumps(_measure(job["exports"], job["sentences"], job["rounds"],
                                  job["batch_rounds"])))
