"""Training speed: non-padding target tokens per second of a training step.

Three designs train on the same data (the bundled cmn.txt, zh→en, the training
part of `bench.in_memory.split_pairs(seed=0)`, tokenized by SentencePiece models trained once here
with `train_tokenizers` at their default sizes, the same token ids for all) at the
same model sizes (the preset's layers, d_model, heads, intermediate_dim, dropout), with the
same optimizer (Adam(0.9, 0.98, 1e-9) on the warmup-then-rsqrt schedule):

- ours: `Seq2SeqTransformer` + our length-bucketed, token-budgeted pipeline
  (`make_training_dataset`, 4096 tokens per batch by default) + our loss and metric
  (label-smoothed), compiled by `compile_model`; under XLA, batches are padded to
  a few fixed shapes as `train` does (`pad_to_static_shapes`).
- ours, sorted: the same model on length-sorted batches (`--batching sorted`: each
  epoch sorted by length and cut into full batches; under XLA, batches whose rows
  fit the fixed shapes, as `train` makes them).
- tutorial: the TensorFlow tutorial's design (`bench.baselines`): post-LN blocks of
  `keras.layers.MultiHeadAttention`, batches of 64 sentences padded to their
  longest row, no bucketing, the tutorial's masked loss and accuracy.
- kerashub: KerasHub's `TransformerEncoder`/`TransformerDecoder` +
  `TokenAndPositionEmbedding` on the tutorial's batches, loss and metric.

Each runs with and without XLA (`jit_compile`); under XLA the baselines' batch
widths are rounded up to a multiple of 8, so that a handful of shapes compile
(the tutorial has no such step: with per-batch shapes XLA would compile at nearly
every step). The step is Keras' own train function (`train_on_batch`, the
function `fit` runs), timed from the call to the returned metric values.

`steps` batches are drawn first from each design's pipeline (its first shuffled
epoch, seed 0), so the input pipeline's own cost is not in the time (in training
it overlaps with the steps through prefetching). Each distinct batch shape runs
once untimed (tracing, XLA compilation). Then `rounds` rounds time every batch of
every design in turn (round-robin, so that changes in the machine's load touch
all designs alike), and each batch counts at its fastest round (load only ever
adds time). Tokens/s = Σ non-padding labels / Σ step seconds.

Model FLOPs (counted, not profiled), per example with padded lengths S, T,
d = d_model, f = intermediate_dim, V = target vocabulary, forward pass (a matmul of
m×k by k×n is 2mkn FLOPs):

    encoder layer   2·S·(4d² + 2df) + 4·S²·d              (QKVO, FFN; QKᵀ and AV)
    decoder layer   2·T·(6d² + 2df) + 2·S·2d² + 4·T²·d + 4·T·S·d
                                                (self QKVO + cross QO; cross KV on
                                                 the source; self and cross scores)
    output          2·T·d·V

and a training step is 3× the forward (the backward pass costs two forwards),
i.e. the usual 6 × matmul parameters × tokens plus the attention terms.
Embedding look-ups, softmax, normalisation and the optimizer are not counted.
"Fraction of ceiling" = FLOPs on the real (padded) batch shapes / step time /
the matmul ceiling of `bench.ceiling` (bf16 under mixed_bfloat16), raised to the
best rate its matmul chain reaches when timed again between the training steps
(so that a ceiling measured during a burst of other load does not inflate the
fractions); "useful" counts each row at its own unpadded lengths instead.
"""

import contextlib
import tempfile
import time
import warnings

import numpy as np

from bench import baselines
from bench import ceiling
from bench.common import jit_modes

MAX_LENGTH = 64  # our pipeline's default source and target truncation (truncates nothing here)
# "tutorial" pads each batch of 64 to its longest row (what the tutorial's code does);
# "tutorial, fixed length" pads every batch to MAX_LENGTH, the design issue 3 names.
DESIGNS = ("ours", "ours, sorted", "tutorial", "tutorial, fixed length", "kerashub")
XLA_MULTIPLE = 8  # under XLA the baselines' widths are rounded up to this (see baselines)

_DATA = {}


def use_corpus(pairs):
    """Makes the benchmarks read `pairs` (a `keras_transformer.data.corpus.PairFiles`,
    from the options every command shares); None: the bundled cmn.txt, zh→en."""
    _DATA.clear()
    _DATA["pairs"] = pairs


def corpus():
    """The corpus `use_corpus` set (a `PairFiles`), or None for the bundled cmn.txt."""
    return _DATA.get("pairs")


def model_config(preset):
    """The preset's config with the benchmark corpus' vocabulary sizes and a length
    cap that fits its longest batches."""
    from keras_transformer.models import preset as make_preset

    _, _, source, target = corpus_and_tokenizers()
    return make_preset(preset, source_vocab_size=source.vocab_size,
                       target_vocab_size=target.vocab_size,
                       max_length=max(MAX_LENGTH, make_preset(preset).max_length))


def corpus_and_tokenizers():
    """(sources, targets, source tokenizer, target tokenizer), built once per process."""
    if "sources" not in _DATA:
        from bench.in_memory import split_pairs
        from keras_transformer.data import read_cmn_eng
        from keras_transformer.data import sources_and_targets
        from keras_transformer.data.tokenizer import SubwordTokenizer
        from keras_transformer.data.tokenizer import train_tokenizers

        pairs = corpus()
        split = split_pairs(pairs.read() if pairs else read_cmn_eng(), seed=0)
        sources, targets = sources_and_targets(split.train)
        with tempfile.TemporaryDirectory(prefix="bench-tokenizers-") as folder:
            source_path, target_path = train_tokenizers(sources, targets, folder)
            source, target = (SubwordTokenizer.from_file(source_path),
                              SubwordTokenizer.from_file(target_path))
        _DATA.update(sources=sources, targets=targets, source=source, target=target)
    return _DATA["sources"], _DATA["targets"], _DATA["source"], _DATA["target"]


def forward_flops(config, source_length, target_length):
    """Forward-pass matmul FLOPs of one example (see the module docstring)."""
    d, f, s, t = config.d_model, config.intermediate_dim, source_length, target_length
    encoder = 2 * s * (4 * d * d + 2 * d * f) + 4 * s * s * d
    decoder = (2 * t * (6 * d * d + 2 * d * f) + 2 * s * 2 * d * d
               + 4 * t * t * d + 4 * t * s * d)
    output = 2 * t * d * config.decoder.vocab_size
    return config.encoder.num_layers * encoder + config.decoder.num_layers * decoder + output


def batch_flops(config, features, labels):
    """(executed, useful) training FLOPs of one batch: padded shapes, real lengths."""
    encoder = np.asarray(features["encoder_tokens"])
    labels = np.asarray(labels)
    rows, s = encoder.shape
    t = labels.shape[1]
    executed = 3 * rows * forward_flops(config, s, t)
    real_s = (encoder != 0).sum(axis=1)
    real_t = (labels != 0).sum(axis=1)
    useful = 3 * sum(forward_flops(config, int(a), int(b)) for a, b in zip(real_s, real_t) if b)
    return executed, useful


def _model_and_batches(design, config, jit, precision, token_budget, baseline_batch, steps,
                       data, batches=None):
    """A compiled model and `steps` batches (numpy) of the design's pipeline.

    Given `batches`, the model trains on those instead (its pipeline is not read).
    """
    import keras

    from bench.in_memory import make_training_dataset
    from keras_transformer.models import Seq2SeqTransformer
    from keras_transformer.data.fitting import pad_to_static_shapes
    from keras_transformer.data.fitting import training_width_step
    from keras_transformer.training.trainer import compile_model
    from keras_transformer.training.trainer import make_optimizer

    sources, targets, source_tokenizer, target_tokenizer = data
    lengths = dict(max_source_length=MAX_LENGTH, max_target_length=MAX_LENGTH)
    if design.startswith("ours"):
        batching = "sorted" if design == "ours, sorted" else "buckets"
        dataset = make_training_dataset(sources, targets, source_tokenizer, target_tokenizer,
                                        token_budget=token_budget, seed=0, batching=batching,
                                        width_step=training_width_step(jit), **lengths)
        if jit:  # as `train` does under XLA: a few fixed shapes
            dataset = pad_to_static_shapes(dataset, MAX_LENGTH, token_budget=token_budget)
        model = Seq2SeqTransformer(config)
        compile_model(model, jit_compile=jit, mixed_precision=precision)
    else:
        fixed = design == "tutorial, fixed length"
        dataset = baselines.tutorial_batches(sources, targets, source_tokenizer,
                                             target_tokenizer, seed=0, batch_size=baseline_batch,
                                             multiple=XLA_MULTIPLE if jit else None,
                                             fixed_length=MAX_LENGTH if fixed else None, **lengths)
        if design.startswith("tutorial"):
            model = baselines.tutorial_transformer(config)
        else:
            model = baselines.kerashub_transformer(config, sequence_length=MAX_LENGTH)
        model.compile(
            optimizer=make_optimizer(config.d_model, 1000, 0.5, mixed_precision=precision),
            loss=baselines.masked_loss, metrics=[baselines.masked_accuracy], jit_compile=jit)
    if batches is None:
        batches = [
            (keras.tree.map_structure(np.asarray, features), np.asarray(labels))
            for features, labels in dataset.take(steps)
        ]
    return model, batches


def _shape(batch):
    features, labels = batch
    return (features["encoder_tokens"].shape, labels.shape)


class Design:
    """One design, compiled, with its batches drawn and every batch shape warmed up."""

    def __init__(self, design, config, jit, precision="none", token_budget=4096,
                 baseline_batch=64, steps=20, batches=None):
        import keras
        import tensorflow as tf

        self.config = config
        self.precision = precision
        with _policy(precision), warnings.catch_warnings():
            _quiet(warnings)
            keras.utils.set_random_seed(0)
            self.model, self.batches = _model_and_batches(
                design, config, jit, precision, token_budget, baseline_batch, steps,
                corpus_and_tokenizers(), batches)
            started = time.perf_counter()
            seen = set()
            # Every distinct shape once: XLA compiles per shape, and tf.function's
            # relaxed traces need not cover a new batch size, so it may retrace
            # (TensorFlow's warning about retracing is expected here).
            logger, level = tf.get_logger(), tf.get_logger().level
            logger.setLevel("ERROR")
            try:
                for batch in self.batches:
                    if _shape(batch) not in seen:
                        seen.add(_shape(batch))
                        self.model.train_on_batch(*batch)
            finally:
                logger.setLevel(level)
        self.warmup_seconds = time.perf_counter() - started
        self.shapes = len(seen)
        self.times = [[] for _ in self.batches]  # seconds of each timed step, per batch

    def step(self, index):
        """Times one training step on batch `index`."""
        features, labels = self.batches[index]
        with _policy(self.precision), warnings.catch_warnings():
            _quiet(warnings)
            begin = time.perf_counter()
            self.model.train_on_batch(features, labels)
            self.times[index].append(time.perf_counter() - begin)

    def summary(self):
        """Totals over the batches, each at its fastest timed step."""
        totals = dict(seconds=0.0, tokens=0, padded=0, executed=0, useful=0, steps=0)
        for (features, labels), times in zip(self.batches, self.times):
            if not times:
                continue
            executed, useful = batch_flops(self.config, features, labels)
            totals["seconds"] += min(times)
            totals["tokens"] += int((labels != 0).sum())
            totals["padded"] += labels.size
            totals["executed"] += executed
            totals["useful"] += useful
            totals["steps"] += 1
        rounds = max((len(times) for times in self.times), default=0)
        return {**totals, "rounds": rounds, "shapes": self.shapes,
                "warmup_seconds": self.warmup_seconds}


@contextlib.contextmanager
def _policy(precision):
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32" if precision == "none" else precision)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def _quiet(warnings):
    # The tutorial's custom layers pass masks on through their inner Add and
    # LayerNormalization layers (as under Keras 2); Keras 3 warns all the same.
    warnings.filterwarnings("ignore", message=".*does not support masking.*")


def run(results, quick=False):
    options = results.options
    preset = options.get("preset", "small")
    precision = options.get("mixed_precision", "none")
    token_budget = options.get("token_budget", 4096)
    baseline_batch = options.get("baseline_batch_size", baselines.BATCH_SIZE)
    modes = jit_modes(options)
    steps = options.get("steps") or (3 if quick else 12)
    rounds = 2 if quick else 3
    config = model_config(preset)
    peak_dtype = "bfloat16" if precision == "mixed_bfloat16" else "float32"
    peak = ceiling.flops(results, peak_dtype, quick=quick)
    peak_label = "bf16" if peak_dtype == "bfloat16" else "fp32"
    probe, probed = None, []
    if peak:  # the same matmul chain, timed again between the steps (see bench.ceiling)
        how = results.context.get(ceiling._key(peak_dtype) + "_how")
        probe = ceiling.MatmulProbe(peak_dtype, ceiling.matrix_size(), how == "XLA")

    designs, measured, order = {}, {}, []
    for design in DESIGNS:
        for jit in modes:
            label = design + (", XLA" if jit else "")
            order.append(label)
            print(f"  training: preparing {label} ...", flush=True)
            try:
                designs[label] = Design(design, config, jit, precision, token_budget,
                                        baseline_batch, steps)
            except ImportError as error:
                print(f"  training: {label} skipped: {error}")
                measured[label] = f"skipped: {error}"
            except Exception as error:  # noqa: BLE001 - e.g. a design XLA cannot compile
                reason = str(error).strip().splitlines()[0][:100] if str(error).strip() else ""
                print(f"  training: {label} failed: {type(error).__name__}: {reason}")
                measured[label] = f"failed: {type(error).__name__}"
    # Round-robin, so that a change in the machine's load touches every design alike.
    print(f"  training: timing {rounds} × {steps} steps of {len(designs)} designs ...", flush=True)
    for _ in range(rounds):
        for index in range(steps):
            for design in designs.values():
                if index < len(design.batches):
                    design.step(index)
            if probe is not None:
                probed.append(probe.rate())
    if probed and max(probed) > peak:
        peak = max(probed)
        ceiling.update(results, peak_dtype, peak)
        results.add("ceiling", f"{results.context.get('ceiling_device', '')}, {peak_label}, "
                    f"probed between training steps ({probe.how})", "matmul rate (raised)",
                    peak / 1e9, "GFLOP/s")
    measured = {label: designs[label].summary() if label in designs else measured[label]
                for label in order}

    def rate(label):
        entry = measured.get(label)
        return entry["tokens"] / entry["seconds"] if isinstance(entry, dict) else None

    baseline_rates = {label: rate(label) for label in measured
                      if not label.startswith("ours") and rate(label)}
    fastest = max(baseline_rates, key=baseline_rates.get) if baseline_rates else None
    suffix = f"{preset}" + ("" if precision == "none" else f", {precision}")
    for label, entry in measured.items():
        case = f"{suffix}, {label}"
        if not isinstance(entry, dict):
            results.add("training", case, f"non-padding target tokens/s ({entry})", None, "tok/s")
            continue
        tokens_per_second = rate(label)
        ratio = None
        if label.startswith("ours") and fastest:
            ratio = tokens_per_second / baseline_rates[fastest]
        results.add("training", case, "non-padding target tokens/s", tokens_per_second, "tok/s",
                    ratio=ratio, baseline=fastest and f"{fastest} (fastest baseline)")
        buckets = label.replace("ours, sorted", "ours")
        if label.startswith("ours, sorted") and rate(buckets):
            results.add("training", case, "tokens/s vs length buckets", tokens_per_second,
                        "tok/s", ratio=tokens_per_second / rate(buckets),
                        baseline=f"{buckets} (length buckets, the default)")
        fixed = [baseline_rates[name] for name in baseline_rates if "fixed length" in name]
        if label.startswith("ours") and fixed:
            results.add("training", case, "tokens/s vs tutorial design, fixed-length padding",
                        tokens_per_second, "tok/s", ratio=tokens_per_second / max(fixed),
                        baseline="tutorial, fixed length (issue 3's baseline)")
        step = entry["seconds"] / entry["steps"]
        if peak:
            results.add("training", case, f"fraction of {peak_label} matmul ceiling",
                        entry["executed"] / entry["seconds"] / peak,
                        f"of {peak / 1e9:.1f} GFLOP/s")
            results.add("training", case, f"useful fraction of {peak_label} ceiling",
                        entry["useful"] / entry["seconds"] / peak, "no padding FLOPs")
        results.add("training", case, "step time", step * 1e3,
                    f"ms ({entry['tokens'] / entry['steps']:.0f} real of "
                    f"{entry['padded'] / entry['steps']:.0f} target tok/step)")
    results.context.setdefault("training", {})[suffix] = {
        label: entry for label, entry in measured.items()}
