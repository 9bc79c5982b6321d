"""`keras-transformer evaluate`: BLEU and chrF of a translator; perplexity of a language model;
accuracy, macro-F1 and the confusion matrix of a classifier.

    keras-transformer evaluate --run runs/zh-en                   # the test split
    keras-transformer evaluate --run runs/lm-en --split test      # perplexity (task lm)
    keras-transformer evaluate --run runs/sentence-type-en        # accuracy, F1 (task classify)
    keras-transformer evaluate --run runs/zh-en --data my.tsv --beam 1
    keras-transformer evaluate --run runs/zh-en --split validation --alpha 1.0
    keras-transformer evaluate --run runs/zh-en --data data/cmn-eng/cmn.txt --src zh --tgt en
    keras-transformer evaluate --run runs/zh-en --source-file test.zh --target-file test.en
    keras-transformer evaluate --saved-model export/zh_en/3 --data runs/zh-en/splits/test.tsv

Data are read as `train` reads them (`keras_transformer.data.corpus.add_pair_arguments`):
`--data` is `source<TAB>reference` lines (the layout of a run's split files) unless
`--src/--tgt` (Tatoeba columns) or `--src-column/--tgt-column` say otherwise; or
two line-aligned files. The hypotheses go to a text file (one per line, in input
order); evaluating a run's split also writes `evaluation.json` into the run folder,
with the weights used (kind, epoch, step, validation loss).

A language-model or classifier run (its task is in its config.json) is evaluated on
a split of its own (`--split`, default test), with `--weights`, `--batch-size` and
`--limit`; the scores also go to `evaluation.json` (`_evaluate_task`).
"""

import datetime
import os
import sys

from keras_transformer.arguments import add_weights_argument
from keras_transformer.constants import DEFAULT_ALPHA
from keras_transformer.constants import DEFAULT_BEAM_WIDTH
from keras_transformer.constants import DEFAULT_COVERAGE
from keras_transformer.data.corpus import add_pair_arguments

from keras_transformer.runs.folder import HELD_OUT as SPLITS  # the training part is streamed, not stored


def add_arguments(parser):
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="run folder (the model is rebuilt with the weights --weights names)")
    source.add_argument(
        "--saved-model",
        help="exported translator, a version folder (export/zh_en/3) or a model base (latest version)",
    )
    source.add_argument(
        "--ctranslate2", metavar="DIR",
        help="a CTranslate2 folder (export --format ctranslate2), searched with --beam, "
             "--alpha and --coverage",
    )
    parser.add_argument(
        "--split", choices=SPLITS,
        help="split of the run folder to evaluate (default: test; not with --data)",
    )
    add_pair_arguments(parser, data_help="source<TAB>reference file to evaluate instead of a split")
    parser.add_argument(
        "--beam", type=int,
        help=f"beam width of the run's model (default: {DEFAULT_BEAM_WIDTH}; 1: greedy). "
        "An export keeps the width it was exported with.",
    )
    parser.add_argument(
        "--alpha", type=float,
        help="length-penalty exponent of the run's beam search, 0 or more; higher favours "
        f"longer translations (default: {DEFAULT_ALPHA}). Choose it on --split validation; "
        "an export keeps the exponent it was exported with.",
    )
    parser.add_argument(
        "--coverage", type=float,
        help="weight of the run's beam search coverage penalty, 0 or more; higher keeps a "
        "translation going until its attention has covered the source (default: "
        f"{DEFAULT_COVERAGE}; 0: none). An export keeps the weight it was exported with.",
    )
    add_weights_argument(parser)
    parser.add_argument(
        "--output", "-o",
        help="hypotheses file (default: <run>/<split>.hypotheses.txt for a split, else hypotheses.txt)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: 64)")
    parser.add_argument("--limit", type=int, help="evaluate only the first N sentences")
    parser.add_argument(
        "--tokenize",
        help="sacrebleu BLEU tokenizer (default: by target language: zh for Chinese, else 13a)",
    )
    parser.add_argument(
        "--show", type=int, default=3,
        help="print this many translations beside their references (default: 3)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _check_positive(name, value):
    if value is not None and value < 1:
        raise ValueError(f"{name} must be a positive integer; received {value}.")


def _prepare(args):
    """Checks the arguments; returns (translate_fn, sources, references, facts)."""
    for name in ("batch_size", "limit", "beam"):
        _check_positive(f"--{name.replace('_', '-')}", getattr(args, name))
    if args.show < 0:
        raise ValueError(f"--show must be 0 or more; received {args.show}.")
    if args.alpha is not None and not args.alpha >= 0:
        raise ValueError(f"--alpha must be a number >= 0; received {args.alpha}.")
    if args.coverage is not None and not args.coverage >= 0:
        raise ValueError(f"--coverage must be a number >= 0; received {args.coverage}.")
    from keras_transformer.data.corpus import pair_files
    from keras_transformer.data.corpus import sources_and_targets

    data = pair_files(args)
    if args.split and data:
        raise ValueError("Give --split or --data (or --source-file/--target-file), not both.")

    if args.ctranslate2 or (args.saved_model and _is_ctranslate2(args.saved_model)):
        translate_fn, sources, references, facts = _ctranslate2_source(args, data)
    elif args.saved_model:
        from keras_transformer.evaluation.translators import find_setting
        from keras_transformer.evaluation.translators import load_saved_model
        from keras_transformer.evaluation.translators import read_manifest
        from keras_transformer.evaluation.translators import saved_model_translator

        if not data:
            raise ValueError(
                "--saved-model needs --data, a source<TAB>reference file (or --source-file/--target-file)."
            )
        if args.split:
            raise ValueError("--split reads a run folder; with --saved-model pass --data.")
        if args.weights:
            raise ValueError("--weights belongs to --run; an export holds its own weights.")
        path, loaded = load_saved_model(args.saved_model)
        manifest = read_manifest(path)
        beam = find_setting(manifest, "beam_width")
        if args.beam is not None and beam is not None and args.beam != beam:
            raise ValueError(
                f"{path} was exported with beam width {beam}; --beam {args.beam} cannot change it "
                "(evaluate the run folder, or export again)."
            )
        alpha = find_setting(manifest, "alpha")
        if args.alpha is not None and alpha is not None and args.alpha != alpha:
            raise ValueError(
                f"{path} was exported with length-penalty exponent {alpha}; --alpha {args.alpha} "
                "cannot change it (evaluate the run folder, or export again)."
            )
        # Exports made before the coverage penalty searched without it.
        coverage = find_setting(manifest, "coverage") or 0.0
        if args.coverage is not None and args.coverage != coverage:
            raise ValueError(
                f"{path} was exported with coverage penalty {coverage}; --coverage "
                f"{args.coverage} cannot change it (evaluate the run folder, or export again)."
            )
        sources, references = sources_and_targets(data.read())
        facts = {
            "saved_model": os.path.abspath(path),
            "data": data.describe(),
            "beam": beam,
            "alpha": alpha,
            "coverage": coverage,
            "target_language": find_setting(manifest, "target_language"),
        }
        translate_fn = saved_model_translator(loaded)
    else:
        from keras_transformer.evaluation.translators import run_translator
        from keras_transformer.runs.loading import load_run

        if not os.path.isdir(args.run):
            raise FileNotFoundError(
                f"{args.run} does not exist: train a run first "
                f"(`keras-transformer train --run {args.run} ...`)."
            )
        run = load_run(args.run, args.weights)
        split = None if data else (args.split or "test")
        if split:
            sources, references = run.split(split)
            if not sources:
                raise ValueError(f"The {split} split of {args.run} is empty; evaluate another, or --data.")
        else:
            sources, references = sources_and_targets(data.read())
        beam = args.beam or DEFAULT_BEAM_WIDTH
        alpha = DEFAULT_ALPHA if args.alpha is None else args.alpha
        coverage = DEFAULT_COVERAGE if args.coverage is None else args.coverage
        facts = {
            "run": os.path.abspath(args.run),
            "split": split,
            "data": None if split else data.describe(),
            "beam": beam,
            "alpha": alpha,
            "coverage": coverage,
            "weights": run.weights.record(relative_to=args.run),
            "target_language": run.config["data"]["target_language"],
        }
        translate_fn = run_translator(run, beam_width=beam, alpha=alpha, coverage=coverage)
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    return translate_fn, sources, references, facts


def _is_ctranslate2(path):
    from keras_transformer.export.ctranslate2 import is_ctranslate2_folder

    return is_ctranslate2_folder(path)


def _ctranslate2_source(args, data):
    """A CTranslate2 folder's (translate_fn, sources, references, facts)."""
    from keras_transformer.data.corpus import sources_and_targets
    from keras_transformer.evaluation.translators import ctranslate2_translator
    from keras_transformer.evaluation.translators import read_manifest

    path = args.ctranslate2 or args.saved_model
    if not data or args.split:
        raise ValueError("a CTranslate2 folder needs --data, a source<TAB>reference file "
                         "(or --source-file/--target-file), not --split.")
    if args.weights:
        raise ValueError("--weights belongs to --run; a CTranslate2 folder holds its own weights.")
    beam = args.beam or DEFAULT_BEAM_WIDTH
    alpha = DEFAULT_ALPHA if args.alpha is None else args.alpha
    coverage = DEFAULT_COVERAGE if args.coverage is None else args.coverage
    translate_fn = ctranslate2_translator(path, beam_width=beam, alpha=alpha, coverage=coverage)
    sources, references = sources_and_targets(data.read())
    facts = {"ctranslate2": os.path.abspath(path), "data": data.describe(), "beam": beam,
             "alpha": alpha, "coverage": coverage,
             "target_language": read_manifest(path).get("target_language")}
    return translate_fn, sources, references, facts


def _evaluate_task(args, run_dir):
    """Evaluates a split of an "lm" or "classify" run; prints the scores, writes evaluation.json."""
    from keras_transformer.runs.loading import load_run
    from keras_transformer.tasks.loading import task_for

    for name in ("batch_size", "limit"):
        _check_positive(f"--{name.replace('_', '-')}", getattr(args, name))
    task = run_dir.task
    refused = [flag for flag, given in (
        ("--data", args.data), ("--source-file", args.source_file), ("--src", args.src),
        ("--tgt", args.tgt), ("--src-column", args.src_column), ("--beam", args.beam),
        ("--alpha", args.alpha), ("--coverage", args.coverage), ("--tokenize", args.tokenize),
        ("--output", args.output),
    ) if given is not None]
    if refused:
        raise ValueError(
            f"{args.run} is a task {task} run: it is evaluated on a split of its own (--split); "
            f"{', '.join(refused)} {'is' if len(refused) == 1 else 'are'} for translation runs."
        )
    split = args.split or "test"
    recipe = task_for(run_dir.config)
    run = load_run(run_dir, args.weights)
    scores = recipe.evaluate_split(run, run_dir, split, args.batch_size, args.limit)
    for line in recipe.describe_scores(scores, split):
        print(line)
    weights = run.weights.record(relative_to=args.run)
    print(f"weights: {weights['kind']} ({weights['path']}, epoch {weights['epoch']}, "
          f"step {weights['step']}, validation loss {weights['val_loss']})")
    record = {
        "task": task,
        **scores,
        "split": split,
        "weights": weights,
        "limit": args.limit,
        "batch_size": args.batch_size,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    run_dir.write_evaluation(record)
    print(f"evaluation: {run_dir.evaluation_path}")
    sys.stdout.flush()
    return 0


def run(args):
    from keras_transformer import files
    from keras_transformer.evaluation.scoring import bleu_tokenizer_for
    from keras_transformer.evaluation.scoring import evaluate
    from keras_transformer.runs.folder import RunFolder

    from keras_transformer.tasks.loading import task_for

    if args.run and RunFolder(args.run).exists() and not task_for(RunFolder(args.run).config).scored_by_bleu:
        return _evaluate_task(args, RunFolder(args.run))
    translate_fn, sources, references, facts = _prepare(args)
    tokenize = args.tokenize or bleu_tokenizer_for(facts["target_language"])
    if facts.get("split"):
        output = args.output or os.path.join(args.run, f"{facts['split']}.hypotheses.txt")
    else:
        output = args.output or "hypotheses.txt"
    result = evaluate(
        translate_fn, sources, references, batch_size=args.batch_size, tokenize=tokenize,
        progress=not args.no_progress,
    )
    files.write_lines(output, result.hypotheses)

    for source, reference, hypothesis in list(zip(sources, references, result.hypotheses))[: args.show]:
        print(f"source:      {source}\nreference:   {reference}\ntranslation: {hypothesis}\n")
    print(result.bleu_text)
    print(result.chrf_text)
    search = f"beam {facts['beam'] or '(as exported)'}"
    if facts.get("alpha") is not None and (facts["beam"] or 0) != 1:
        search += f", alpha {facts['alpha']}"
        if facts.get("coverage"):
            search += f", coverage {facts['coverage']}"
    print(f"{result.sentences} sentences, {search}; hypotheses: {output}")
    if facts.get("weights"):
        weights = facts["weights"]
        print(f"weights: {weights['kind']} ({weights['path']}, epoch {weights['epoch']}, "
              f"step {weights['step']}, validation loss {weights['val_loss']})")
    if facts.get("split"):
        record = {
            **result.summary(),
            **{key: value for key, value in facts.items() if key not in ("run", "data")},
            "limit": args.limit,
            "batch_size": args.batch_size,
            "hypotheses": os.path.abspath(output),
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        run_dir = RunFolder(args.run)
        run_dir.write_evaluation(record)
        print(f"evaluation: {run_dir.evaluation_path}")
    sys.stdout.flush()
    return 0
