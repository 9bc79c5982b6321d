"""`keras-transformer export`: a run folder → `export/<name>/<version>/` for TF Serving.

The run's task (its config.json) chooses what is exported: a translator
(`TranslationModule`), a language model (`LanguageModelModule`) or a classifier
(`ClassificationModule`). The run's default weights (the average training wrote,
else the best) are exported unless `--weights` says otherwise; the manifest
records the task and which weights (kind, file, epoch, step, validation loss).
"""

from keras_transformer.arguments import add_weights_argument
from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE
from keras_transformer.constants import MIN_SHARD_ROWS


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
                        help="translator without XLA: search a batch as P shards at once, on P "
                             f"cores, when each shard gets {MIN_SHARD_ROWS} hypotheses or more "
                             "(default: 2, 1 with --xla; 1 for a server whose cores are already "
                             "busy with concurrent requests)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing version")
    parser.add_argument("--no-keras", dest="keras", action="store_false",
                        help="do not write model.keras beside the SavedModel")


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


def _translation_export(run, run_folder, beam, alpha, coverage, max_length, xla,
                        parallel_searches):
    from keras_transformer.export.module import TranslationModule

    module = TranslationModule(
        run.model, run.source_tokenizer, run.target_tokenizer, run.max_source_length,
        beam_width=beam, alpha=alpha, coverage=coverage, max_output_length=max_length,
        jit_compile=xla, parallel_searches=parallel_searches,
    )
    test_sources, _ = run.split("test")
    data = run.config["data"]
    manifest = {
        "source_language": data.get("source_language"),
        "target_language": data.get("target_language"),
        "source_vocab_size": run.source_tokenizer.vocab_size,
        "target_vocab_size": run.target_tokenizer.vocab_size,
        "max_source_length": run.max_source_length,
        "decoding": {"beam_width": beam, "alpha": alpha, "coverage": coverage, "xla": xla,
                     "parallel_searches": module.search.parallel_searches},
    }
    return module, test_sources[:4] or ["你好。"], manifest


def _language_model_export(run, run_folder, max_length, max_new_tokens, xla):
    from keras_transformer.export.module import LanguageModelModule

    module = LanguageModelModule(run.model, run.tokenizer, max_length=max_length,
                                 max_new_tokens=max_new_tokens, jit_compile=xla)
    manifest = {
        "language": run.config["data"].get("language"),
        "vocab_size": run.tokenizer.vocab_size,
        "max_length": module.max_length,
        "generation": {"max_new_tokens": module.max_new_tokens, "xla": xla},
    }
    return module, run_folder.read_texts("test")[:4] or ["Hello"], manifest


def _classifier_export(run, run_folder):
    from keras_transformer.export.module import ClassificationModule

    module = ClassificationModule(run.model, run.tokenizer, run.labels, run.max_length)
    _, test_texts = run_folder.read_labelled("test")
    manifest = {
        "language": run.config["data"].get("language"),
        "labels": list(run.labels),
        "vocab_size": run.tokenizer.vocab_size,
        "max_length": run.max_length,
    }
    return module, test_texts[:4] or ["Hello"], manifest


def export_run(run_dir, name, base="export", version=None, beam=DEFAULT_BEAM_WIDTH,
               alpha=DEFAULT_ALPHA, max_length=None, xla=False, overwrite=False, keras_file=True,
               weights=None, max_new_tokens=32, parallel_searches=None,
               coverage=DEFAULT_COVERAGE):
    """Exports the model of a run folder, whatever its task; returns the version folder's path.

    `weights`: None (the default choice), "best", "last", "average" or a weights file
    (`RunFolder.weights`). `beam`, `alpha`, `coverage` and `parallel_searches`
    (`SequenceSearch`'s, None for its default) concern translators, `max_new_tokens` language models,
    `max_length` and `xla` both.
    """
    from keras_transformer.export.writer import check_model_name
    from keras_transformer.export.writer import write_export
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.runs.loading import load_run

    check_model_name(name)
    run_folder = RunFolder(run_dir)
    run = load_run(run_folder, weights)
    if run.task == "lm":
        module, warmup, details = _language_model_export(
            run, run_folder, max_length, max_new_tokens, xla)
    elif run.task == "classify":
        module, warmup, details = _classifier_export(run, run_folder)
    else:
        module, warmup, details = _translation_export(
            run, run_folder, beam, alpha, coverage, max_length, xla, parallel_searches)
    manifest = {
        "task": run.task,
        "model": run.config["model"],
        "preset": run.config.get("preset"),
        **details,
        "signatures": sorted(module.signatures()),
        "weights": run.weights.record(relative_to=run_dir),
        "test_score": run_folder.read_evaluation(),
        "exported_with": library_versions(),
    }
    return write_export(
        module, base, name, version=version, overwrite=overwrite, warmup_texts=warmup,
        manifest=manifest, keras_model=run.model if keras_file else None,
        asset_files=run_folder.tokenizer_files(),
    )


def run(args):
    path = export_run(args.run, args.name, base=args.base, version=args.version, beam=args.beam,
                      alpha=args.alpha, coverage=args.coverage, max_length=args.max_length,
                      xla=args.xla, overwrite=args.overwrite, keras_file=args.keras, weights=args.weights,
                      max_new_tokens=args.max_new_tokens,
                      parallel_searches=args.parallel_searches)
    print(f"exported {path}")
    if args.xla:
        print("this export uses XLA: start TF Serving with --xla_cpu_compilation_enabled=true")
