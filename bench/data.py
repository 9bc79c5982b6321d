"""`data`: a translation run's input at corpus sizes from 28k to 10M pairs, streamed, beside
the in-memory input on the bundled corpus.

The corpora are made here from the bundled cmn.txt (zh→en): copy k of every pair has
" k" after both sentences (copy 0 is the corpus itself), so that every copy's pairs are
distinct, even under normalization; they are written as gzipped shards (8 from 1M pairs
up) in a temporary folder. For each size a fresh process runs `train` (the `train`
command's function, `--dictionary none`, the preset of `--preset`, `--batch-tokens` of
`--token-budget`) for a few steps and reports:

- **first step**: seconds from the process's start (Python, TensorFlow, the scan, the
  tokenizers, the model) to the end of the first training step: what a user waits;
- **peak RSS** of the process (`ru_maxrss`);
- **run folder**: its size after training, and without the weights (what depends on the
  data: config, held-out splits, tokenizers);
- **steps/s** in its own process, over the steps after the first few (beside the other
  sizes': the processes run one after the other, so a busy machine shows here).

The baseline, **in-memory** (`bench.in_memory`): the bundled corpus read into lists,
split by union-find, tokenized once and cached, the whole corpus shuffled each epoch (the
input `train` had before it streamed). One process trains one model of the 28k run in
turns, `BLOCK` steps on the run's stream, then `BLOCK` on the in-memory input, for
`ROUNDS` rounds after an untimed one, each input pipeline running in the background
while the steps run, as in `fit`: steady-state **steps/s** and real (non-padding) target
**tokens/s** of each, as a ratio to in-memory.

    python -m bench data                       # 28k, 1M and 10M pairs (the 10M corpus: ~1 GB on disk)
    python -m bench data --sizes 28k,1M        # some sizes
    python -m bench data --quick               # 28k only, the tiny preset, few steps
"""

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

SIZES = {"28k": 28_155, "1M": 1_000_000, "10M": 10_000_000}
STEPS = 20
QUICK_STEPS = 8
# The steady state in turns: `ROUNDS` rounds of `BLOCK` steps of each input, after one
# untimed round.
ROUNDS, BLOCK = 6, 4
QUICK_ROUNDS, QUICK_BLOCK = 2, 3
WARM_STEPS = 5  # steps left out of the steady state (tracing, the first windows)
QUICK_WARM_STEPS = 3


def make_corpus(folder, pairs, lines):
    """Writes `pairs` distinct pairs, tagged copies of `lines` (cmn.txt's), as gzipped shards.

    Returns:
        The glob of the shards.
    """
    os.makedirs(folder, exist_ok=True)
    shards = 8 if pairs >= 1_000_000 else 1
    files = [gzip.open(os.path.join(folder, f"part-{i:02d}.tsv.gz"), "wt", encoding="utf-8",
                       compresslevel=1) for i in range(shards)]
    try:
        written, copy = 0, 0
        while written < pairs:
            tag = f" {copy}" if copy else ""
            block = [f"{en}{tag}\t{zh}{tag}\n" for en, zh in lines[:pairs - written]]
            files[copy % shards].write("".join(block))
            written += len(block)
            copy += 1
    finally:
        for file in files:
            file.close()
    return os.path.join(folder, "part-*.tsv.gz")


def _folder_bytes(path, weights=True):
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            if weights or not (name.endswith(".h5") or name.endswith(".keras")):
                total += os.path.getsize(os.path.join(root, name))
    return total


def job(data, run_dir, preset, steps, token_budget):
    """Trains `steps` steps in this process; returns the measurements (see the module docstring)."""
    import resource

    import keras
    import numpy as np

    from keras_transformer.training.config import TrainingConfig
    from keras_transformer.training.trainer import train

    ends = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ends.append(time.perf_counter())

    config = TrainingConfig(max_steps=steps, patience=0, token_budget=token_budget,
                            save_freq=10_000, validation_batch_size=64)
    train(run_dir, config, data=data, preset=preset,
          prepare_options={"src": "zh", "tgt": "en", "dictionary": None}, callbacks=[Clock()], verbose=0)
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.tasks.translator import Translator

    run = RunFolder(run_dir)
    stream, _, _ = Translator.make_datasets(run, run.config, config, seed=config.seed)
    tokens = [int(np.sum(np.asarray(labels) != 0)) for _, labels in stream.take(steps)]
    warm = WARM_STEPS if steps > 2 * WARM_STEPS else QUICK_WARM_STEPS
    seconds = ends[-1] - ends[warm - 1]
    return {
        "first_step_s": ends[0] - START,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "steps_per_s": (len(ends) - warm) / seconds,
        "tokens_per_s": sum(tokens[warm:len(ends)]) / seconds,
        "run_folder_mb": _folder_bytes(run_dir) / 2**20,
        "run_folder_data_mb": _folder_bytes(run_dir, weights=False) / 2**20,
        "train_examples": run.config["data"]["split_sizes"]["train"],
    }


def _in_memory_stream(run, config, seed):
    """The bundled corpus held in memory (`bench.in_memory`), batched for a run's tokenizers:
    epoch after epoch, endless."""
    from bench import in_memory
    from keras_transformer.data.corpus import read_cmn_eng
    from keras_transformer.data.corpus import sources_and_targets

    sources, targets = sources_and_targets(in_memory.split_pairs(read_cmn_eng()).train)
    source_tokenizer, target_tokenizer = run.tokenizers()
    data = run.config["data"]
    return in_memory.make_training_dataset(
        sources, targets, source_tokenizer.with_prefix(""), target_tokenizer,
        token_budget=config.token_budget, seed=seed, batching=config.batching,
        max_source_length=data["max_source_length"], max_target_length=data["max_target_length"],
    ).repeat()


def throughput_job(run_dir, rounds, block, token_budget):
    """Steady-state steps/s and tokens/s of one model trained in turns, `block` steps at a
    time, on the run's stream and on the in-memory input; the input pipelines run in the
    background during the steps, as in `fit`."""
    import keras
    import numpy as np

    from keras_transformer.data.fitting import for_fit
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.tasks.translator import Translator
    from keras_transformer.training.config import TrainingConfig
    from keras_transformer.training.trainer import compile_model
    from keras_transformer.training.trainer import device_defaults

    run = RunFolder(run_dir)
    config = TrainingConfig(token_budget=token_budget)
    policy = device_defaults()["mixed_precision"]
    keras.config.set_dtype_policy("float32" if policy == "none" else policy)
    streamed, validation, _ = Translator.make_datasets(run, run.config, config, seed=config.seed)
    memory, _ = for_fit(_in_memory_stream(run, config, config.seed), validation)
    model = Translator.build_model(run.config)
    compile_model(model, mixed_precision=policy, d_model=run.config["model"]["d_model"],
                  loss=Translator.training_loss(run.config, config),
                  metrics=Translator.training_metrics(run.config))
    inputs = {"streamed": iter(streamed), "in-memory": iter(memory)}
    seconds = {name: 0.0 for name in inputs}
    tokens = {name: 0 for name in inputs}
    for turn in range(rounds + 1):  # the first round warms up (traces), untimed
        for name, batches in inputs.items():
            for _ in range(block):
                features, labels = next(batches)
                begin = time.perf_counter()
                model.train_on_batch(features, labels)
                if turn:
                    seconds[name] += time.perf_counter() - begin
                    tokens[name] += int(np.sum(np.asarray(labels) != 0))
    steps = rounds * block
    return {name: {"steps_per_s": steps / seconds[name], "tokens_per_s": tokens[name] / seconds[name]}
            for name in inputs}


def _measure(**arguments):
    """Runs `job` (or `throughput_job`, given "rounds") in a fresh process; its JSON answer."""
    command = [sys.executable, "-m", "bench.data", "--job", json.dumps(arguments)]
    process = subprocess.run(command, capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if process.returncode:
        raise RuntimeError(f"bench data job failed:\n{process.stderr[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def run(results, quick=False):
    from keras_transformer.data.corpus import DEFAULT_CMN_ENG_PATH

    options = results.options
    preset = "tiny" if quick else options.get("preset", "small")
    steps = QUICK_STEPS if quick else STEPS
    rounds, block = (QUICK_ROUNDS, QUICK_BLOCK) if quick else (ROUNDS, BLOCK)
    token_budget = options.get("token_budget", 4096)
    sizes = ["28k"] if quick else options.get("sizes") or list(SIZES)
    with open(DEFAULT_CMN_ENG_PATH, encoding="utf-8-sig") as file:
        lines = [line.rstrip("\n").split("\t")[:2] for line in file]
    measured = {}
    with tempfile.TemporaryDirectory(prefix="bench-data-") as folder:
        for name in ["28k", *[size for size in sizes if size != "28k"]]:
            begin = time.time()
            data = make_corpus(os.path.join(folder, name), SIZES[name], lines)
            print(f"  data: {name} pairs written in {time.time() - begin:.0f} s", flush=True)
            run_dir = os.path.join(folder, f"run-{name}")
            measured[name] = _measure(data=data, run_dir=run_dir, preset=preset, steps=steps,
                                      token_budget=token_budget)
            print(f"  data: streamed {name}: {measured[name]}", flush=True)
            if name == "28k":
                turns = _measure(run_dir=run_dir, rounds=rounds, block=block, token_budget=token_budget)
                print(f"  data: 28k in turns: {turns}", flush=True)
            _remove(os.path.join(folder, name))
    small = measured["28k"]
    for name in sizes:
        values = measured[name]
        case = f"{preset}, streamed, {name} pairs"
        results.add("data", case, "first training step", values["first_step_s"], "s",
                    small["first_step_s"] / values["first_step_s"], "streamed 28k")
        results.add("data", case, "peak RSS", values["peak_rss_mb"], "MB",
                    small["peak_rss_mb"] / values["peak_rss_mb"], "streamed 28k")
        results.add("data", case, "run folder without weights", values["run_folder_data_mb"], "MB",
                    small["run_folder_data_mb"] / values["run_folder_data_mb"], "streamed 28k")
        results.add("data", case, "run folder", values["run_folder_mb"], "MB")
        # Each size in its own process, one after the other: no ratio (a busy machine shows
        # here); the comparison is the one in turns below.
        results.add("data", case, "steps/s (own process)", values["steps_per_s"], "steps/s")
    baseline = turns["in-memory"]
    for name in ("streamed", "in-memory"):
        case = f"{preset}, {name}, 28k pairs, in turns"
        for metric, unit in (("steps_per_s", "steps/s"), ("tokens_per_s", "tokens/s")):
            results.add("data", case, unit, turns[name][metric], unit,
                        turns[name][metric] / baseline[metric], "in-memory")
    results.context["data"] = {**measured, "in turns": turns}


def _remove(path):
    import shutil

    shutil.rmtree(path, ignore_errors=True)


START = time.perf_counter()

if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    arguments = json.loads(sys.argv[sys.argv.index("--job") + 1])
    print(json.dumps(throughput_job(**arguments) if "rounds" in arguments else job(**arguments)))
