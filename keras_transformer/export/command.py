"""`keras-transformer export`: a run folder → `export/<name>/<version>/` for TF Serving.

The run's task (its config.json) chooses what is exported: a translator
(`TranslationModule`), a language model (`LanguageModelModule`) or a classifier
(`ClassificationModule`). The run's default weights (the average training wrote,
else the best) are exported unless `--weights` says otherwise; the manifest
records the task and which weights (kind, file, epoch, step, validation loss).

`--quantize none|int8|bfloat16` chooses the weights a SavedModel stores and
computes with (`keras_transformer.export.quantization`); `--format ctranslate2`
writes a translator as a CTranslate2 model folder instead
(`keras_transformer.export.ctranslate2`). The version folder also holds `preset/`,
the float32 weights and tokenizers (`Task.save_to_preset`) that `keras_transformer.load`
and `train --init-from` fine-tune from (`--no-preset` leaves it out).
"""

from keras_transformer.arguments import add_weights_argument
from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE
from keras_transformer.constants import MIN_GROUP_ROWS

FORMATS = ("savedmodel", "ctranslate2")
# Choices as the command line shows them (`export.quantization`, `export.ctranslate2`
# check them again, with TensorFlow loaded).
QUANTIZATIONS = ("none", "int8", "bfloat16")
CTRANSLATE2_QUANTIZATIONS = ("int8", "int8_float32", "int8_bfloat16", "bfloat16", "float32")


def add_arguments(parser):
    parser.add_argument("--run", required=True, help="the run folder written by `train`")
    add_weights_argument(parser)
    parser.add_argument("--name", required=True, help="model name, e.g. zh_en")
    parser.add_argument("--base", default="export", help="TF Serving base path (default: export)")
    parser.add_argument("--version", type=int, default=None,
                        help="version number (default: one above the latest)")
    parser.add_argument("--beam", type=int, default=DEFAULT_BEAM_WIDTH,
                        help=f"translator: beam width; 1 = greedy (default: {DEFAULT_BEAM_WIDTH})")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help="translator: length-penalty exponent, 0 or more; higher favours "
                             f"longer translations (default: {DEFAULT_ALPHA})")
    parser.add_argument("--coverage", type=float, default=DEFAULT_COVERAGE,
                        help="translator: weight of beam search's coverage penalty, 0 or more; "
                             "higher keeps a translation going until its attention has covered "
                             f"the source (default: {DEFAULT_COVERAGE}; 0: none)")
    parser.add_argument("--max-length", type=int, default=None,
                        help="translator: cap on output subwords; language model: cap on "
                             "prompt and new subwords together (default: the model's "
                             "max_length)")
    parser.add_argument("--max-new-tokens", type=int, default=32,
                        help="language model: new subwords of the greedy serving_default "
                             "signature (default: 32)")
    parser.add_argument("--xla", action="store_true",
                        help="compile decoding (translator) or generation (language model) "
                             "with XLA; TF Serving then needs --xla_cpu_compilation_enabled=true")
    parser.add_argument("--parallel-searches", type=int, default=None, metavar="P",
                        help="translator without XLA: decode a batch's rows as P groups at "
                             f"once, on P cores, when each group gets {MIN_GROUP_ROWS} hypotheses "
                             "or more (default: 2, 1 with --xla; 1 for a server whose cores are "
                             "already busy with concurrent requests)")
    parser.add_argument("--format", choices=FORMATS, default="savedmodel",
                        help="savedmodel: a TF Serving version folder (default); ctranslate2: "
                             "a translator as a CTranslate2 model folder, "
                             "<base>/<name>/ctranslate2-<quantization> (needs the "
                             "ctranslate2 extra)")
    parser.add_argument("--quantize", choices=QUANTIZATIONS, default="none",
                        help="savedmodel: weights stored and computed as int8 (Keras' int8 "
                             "quantization) or bfloat16; none keeps float32 (default: none)")
    parser.add_argument("--ct2-quantization", choices=CTRANSLATE2_QUANTIZATIONS,
                        default="int8",
                        help="ctranslate2: CTranslate2's weight type (default: int8)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing version")
    parser.add_argument("--no-preset", dest="preset", action="store_false",
                        help="do not write preset/ (the Keras weights and tokenizers, for "
                        "`keras_transformer.load` and `train --init-from`) beside the SavedModel")


def library_versions():
    """Versions of the libraries that wrote an export (for its manifest)."""
    import keras
    import tensorflow as tf
    import tensorflow_text

    import keras_transformer

    return {
        "tensorflow": tf.__version__,
        "tensorflow_text": tensorflow_text.__version__,
        "keras": keras.__version__,
        "keras_transformer": keras_transformer.__version__,
    }


def export_run(run_dir, name, base="export", version=None, beam=DEFAULT_BEAM_WIDTH,
               alpha=DEFAULT_ALPHA, max_length=None, xla=False, overwrite=False, preset=True,
               weights=None, max_new_tokens=32, parallel_searches=None,
               coverage=DEFAULT_COVERAGE, quantize="none"):
    """Exports the model of a run folder, whatever its task; returns the version folder's path.

    The run's task object (`keras_transformer.load`) makes the exported module
    (`Task.export_parts`). `weights`: None (the default choice), "best", "last",
    "average" or a weights file (`RunFolder.weights`). `beam`, `alpha`, `coverage` and
    `parallel_searches` (`SequenceSearch`'s, None for its default) concern translators,
    `max_new_tokens` language models, `max_length` and `xla` both. With `preset`,
    the version folder also holds `preset/` (`Task.save_to_preset`): what
    `keras_transformer.load` and `train --init-from` read to fine-tune the export's
    model; TF Serving ignores it. `quantize`: "none", "int8" or "bfloat16"
    (`export.quantization.quantize_model`), recorded in the manifest; preset/ keeps the
    float32 weights.
    """
    from keras_transformer.export.quantization import quantize_model
    from keras_transformer.export.writer import check_model_name
    from keras_transformer.export.writer import write_export
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.tasks.loading import load

    check_model_name(name)
    run_folder = RunFolder(run_dir)
    task = load(run_dir, weights=weights)
    preset_task = task if quantize == "none" else load(run_dir, weights=weights)
    task.model = quantize_model(task.model, quantize)
    module, details = task.export_parts(
        beam=beam, alpha=alpha, coverage=coverage, max_length=max_length, xla=xla,
        parallel_searches=parallel_searches, max_new_tokens=max_new_tokens)
    manifest = {
        "task": task.name,
        "model": task.config["model"],
        "preset": task.config.get("preset"),
        "quantization": quantize,
        **details,
        "signatures": sorted(module.signatures()),
        "weights": task.weights.record(relative_to=run_dir),
        "test_score": run_folder.read_evaluation(),
        "exported_with": library_versions(),
    }
    return write_export(
        module, base, name, version=version, overwrite=overwrite,
        warmup_texts=task.warmup_texts(run_folder), manifest=manifest,
        preset=preset_task if preset else None, asset_files=run_folder.tokenizer_files(),
    )


def export_ctranslate2(run_dir, name, base="export", quantization="int8", weights=None,
                       overwrite=False):
    """Converts a translator run to `<base>/<name>/ctranslate2-<quantization>/`; returns it."""
    from keras_transformer.export.ctranslate2 import convert_run
    from keras_transformer.export.ctranslate2 import ctranslate2_folder
    from keras_transformer.export.writer import check_model_name
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.runs.loading import load_run

    check_model_name(name)
    run_folder = RunFolder(run_dir)
    run = load_run(run_folder, weights, task="translate", command="export --format ctranslate2")
    return convert_run(run, run_folder, ctranslate2_folder(base, name, quantization),
                       quantization=quantization, overwrite=overwrite)


def run(args):
    if args.format == "ctranslate2":
        if args.quantize != "none":
            raise ValueError("--quantize chooses a SavedModel's weights; a CTranslate2 folder "
                             "takes --ct2-quantization.")
        path = export_ctranslate2(args.run, args.name, base=args.base,
                                  quantization=args.ct2_quantization, weights=args.weights,
                                  overwrite=args.overwrite)
        print(f"exported {path}")
        return
    path = export_run(args.run, args.name, base=args.base, version=args.version, beam=args.beam,
                      alpha=args.alpha, coverage=args.coverage, max_length=args.max_length,
                      xla=args.xla, overwrite=args.overwrite, preset=args.preset, weights=args.weights,
                      max_new_tokens=args.max_new_tokens,
                      parallel_searches=args.parallel_searches, quantize=args.quantize)
    print(f"exported {path}")
    if args.xla:
        print("this export uses XLA: start TF Serving with --xla_cpu_compilation_enabled=true")
