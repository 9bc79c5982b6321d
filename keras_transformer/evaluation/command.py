"""`keras-transformer evaluate`: BLEU and chrF of a run folder or an export.

    keras-transformer evaluate --run runs/zh-en                   # the test split
    keras-transformer evaluate --run runs/zh-en --data my.tsv --beam 1
    keras-transformer evaluate --saved-model export/zh_en/3 --data runs/zh-en/splits/test.tsv

Data files are `source<TAB>reference` lines, the layout of a run's split files.
The hypotheses go to a text file (one per line, in input order); evaluating a
run's split also writes `evaluation.json` into the run folder.
"""

import datetime
import json
import os
import sys

from keras_transformer.runs import EVALUATION_NAME

SPLITS = ("train", "validation", "test")
DEFAULT_BEAM = 4
DEFAULT_ALPHA = 0.6


def add_arguments(parser):
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="run folder (the model is rebuilt from its best weights)")
    source.add_argument(
        "--saved-model",
        help="exported translator, a version folder (export/zh_en/3) or a model base (latest version)",
    )
    parser.add_argument(
        "--split", choices=SPLITS,
        help="split of the run folder to evaluate (default: test; not with --data)",
    )
    parser.add_argument("--data", help="source<TAB>reference file to evaluate instead of a split")
    parser.add_argument(
        "--beam", type=int,
        help=f"beam width of the run's model (default: {DEFAULT_BEAM}; 1: greedy). "
        "An export keeps the width it was exported with.",
    )
    parser.add_argument("--weights", help="weights file of the run (default: final, else latest checkpoint)")
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


def read_pairs(path):
    """(sources, references) of a source<TAB>reference file, with clear errors."""
    from keras_transformer.data.corpus import read_tsv
    from keras_transformer.data.corpus import sources_and_targets

    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist.")
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder; pass a source<TAB>reference file.")
    return sources_and_targets(read_tsv(path, 0, 1))


def _write_lines(path, lines):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as file:
        for line in lines:
            file.write(line + "\n")
    os.replace(temporary, path)


def _write_json(path, value):
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(value, file, indent=2, ensure_ascii=False)
        file.write("\n")
    os.replace(temporary, path)


def _prepare(args):
    """Checks the arguments; returns (translate_fn, sources, references, facts)."""
    for name in ("batch_size", "limit", "beam"):
        _check_positive(f"--{name.replace('_', '-')}", getattr(args, name))
    if args.show < 0:
        raise ValueError(f"--show must be 0 or more; received {args.show}.")
    if args.split and args.data:
        raise ValueError("Give --split or --data, not both.")

    if args.saved_model:
        from keras_transformer.evaluation.translators import find_setting
        from keras_transformer.evaluation.translators import load_saved_model
        from keras_transformer.evaluation.translators import read_manifest
        from keras_transformer.evaluation.translators import saved_model_translator

        if not args.data:
            raise ValueError("--saved-model needs --data, a source<TAB>reference file.")
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
        sources, references = read_pairs(args.data)
        facts = {
            "saved_model": os.path.abspath(path),
            "data": os.path.abspath(args.data),
            "beam": beam,
            "target_language": find_setting(manifest, "target_language"),
        }
        translate_fn = saved_model_translator(loaded)
    else:
        from keras_transformer.evaluation.translators import run_translator
        from keras_transformer.runs import load_run

        if not os.path.isdir(args.run):
            raise FileNotFoundError(
                f"{args.run} does not exist: train a run first "
                f"(`keras-transformer train --run {args.run} ...`)."
            )
        run = load_run(args.run, weights=args.weights)
        split = None if args.data else (args.split or "test")
        if split:
            sources, references = run.split(split)
            if not sources:
                raise ValueError(f"The {split} split of {args.run} is empty; evaluate another, or --data.")
        else:
            sources, references = read_pairs(args.data)
        beam = args.beam or DEFAULT_BEAM
        facts = {
            "run": os.path.abspath(args.run),
            "split": split,
            "data": None if split else os.path.abspath(args.data),
            "beam": beam,
            "alpha": DEFAULT_ALPHA,
            "weights": os.path.relpath(run.weights_path, args.run),
            "target_language": run.config.get("data", {}).get("target_language"),
        }
        translate_fn = run_translator(run, beam_width=beam, alpha=DEFAULT_ALPHA)
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    return translate_fn, sources, references, facts


def run(args):
    from keras_transformer.evaluation.scoring import bleu_tokenizer_for
    from keras_transformer.evaluation.scoring import evaluate

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
    _write_lines(output, result.hypotheses)

    for source, reference, hypothesis in list(zip(sources, references, result.hypotheses))[: args.show]:
        print(f"source:      {source}\nreference:   {reference}\ntranslation: {hypothesis}\n")
    print(result.bleu_text)
    print(result.chrf_text)
    print(f"{result.sentences} sentences, beam {facts['beam'] or '(as exported)'}; hypotheses: {output}")
    if facts.get("split"):
        record = {
            **result.summary(),
            **{key: value for key, value in facts.items() if key not in ("run", "data")},
            "limit": args.limit,
            "batch_size": args.batch_size,
            "hypotheses": os.path.abspath(output),
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        path = os.path.join(args.run, EVALUATION_NAME)
        _write_json(path, record)
        print(f"evaluation: {path}")
    sys.stdout.flush()
    return 0
