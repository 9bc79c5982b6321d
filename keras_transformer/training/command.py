"""`keras-transformer train`: train a translator, a language model or a classifier into a run folder.

Example:
    keras-transformer train --preset small --data data/cmn-eng/cmn.txt \\
        --src zh --tgt en --run runs/zh-en --minutes 25
    keras-transformer train --task lm --data data/cmn-eng/cmn.txt --column en --run runs/lm-en
    keras-transformer train --task classify --data data/sentence-type/en.tsv --language en \\
        --run runs/sentence-type-en

`--task` (translate, the default; lm; classify) is recorded in the run, so a resumed
run needs no `--task`. An "lm" run reads one text a line (`--data FILE`), or one
column of a TSV (`--column en` for the Tatoeba layout's English, or a 0-based
number); a "classify" run reads label<TAB>text lines (or `--label-column/--text-column`).

Running the same command again resumes the run from its last backup. On a resumed
run a training flag that is given overrides the stored setting (each difference is
printed, one line each); a flag not given keeps the stored setting. The training
flags are generated from `TrainingConfig`'s fields (names, types, defaults, help).
A new run's model is its preset with the `MODEL_FLAGS` given (its shape, its dropout
rates, pre- or post-LN blocks); a resumed run keeps its model and refuses a flag that
differs from it.
"""

import argparse

from keras_transformer.constants import DEFAULT_TASK
from keras_transformer.constants import TASKS
from keras_transformer.data.corpus import add_pair_arguments
from keras_transformer.ops.choices import ACTIVATIONS
from keras_transformer.training.config import add_config_arguments
from keras_transformer.training.strategy import STRATEGIES

DEFAULT_PRESET = "small"
# `BackboneConfig` settings a new run may change from its preset: (type, metavar, help).
# The config checks the values (a width the heads divide, rates in [0, 1)).
MODEL_FLAGS = {
    "num_encoder_layers": (int, "N", "encoder blocks (translate, classify)"),
    "num_decoder_layers": (int, "N", "decoder blocks (translate, lm)"),
    "d_model": (int, "M", "model width; --num-heads must divide it"),
    "num_heads": (int, "H", "attention heads; --d-model must be a multiple of it"),
    "intermediate_dim": (int, "F", "feed-forward hidden width"),
    "dropout": (float, "RATE", "residual and embedding dropout"),
    "attention_dropout": (float, "RATE", "dropout on the attention weights"),
    "activation_dropout": (float, "RATE", "dropout on the feed-forward hidden layer"),
    "activation": (str, "NAME", f"feed-forward activation: {', '.join(ACTIVATIONS)}"),
    "norm_first": (bool, None, "pre-LN blocks (Xiong et al., 2020), steadier for deep models "
                   "(--no-norm-first: the Transformer paper's post-LN)"),
}


def add_arguments(parser):
    from keras_transformer.models.config import PRESETS

    parser.add_argument("--run", required=True, help="run folder (created, or resumed)")
    parser.add_argument(
        "--task", choices=TASKS,
        help="what a new run learns: translate (sentence pairs, the default), lm (a language "
        "model of one text a line) or classify (label<TAB>text); a resumed run keeps its own",
    )
    parser.add_argument(
        "--preset", default=None, choices=sorted(PRESETS),
        help=f"model preset of a new run (default: {DEFAULT_PRESET}; a resumed run keeps its own)",
    )
    parser.add_argument(
        "--init-from", metavar="MODEL",
        help="fine-tune: a new run starts from this trained model's weights, tokenizers and "
        "shape (a run folder, a preset folder or an export of the same task) on the new --data",
    )
    parser.add_argument(
        "--config", metavar="YAML",
        help="training settings from a YAML file: keys are the training settings below (their "
        "flag names or field names, e.g. batch-tokens or token_budget); a flag given beside it wins",
    )
    parser.add_argument(
        "--minutes", type=float,
        help="a time budget: stop cleanly after this many minutes (resumable)",
    )
    parser.add_argument(
        "--strategy", default="default", choices=STRATEGIES,
        help="tf.distribute data parallelism: default (one device), mirrored (the GPUs of one "
        "machine) or multi-worker (several machines, from TF_CONFIG) (default: default)",
    )
    parser.add_argument(
        "--devices", help="comma-separated devices of the mirrored strategy (default: all GPUs)"
    )
    parser.add_argument(
        "--verbose", type=int, choices=(0, 1, 2),
        help="Keras progress output: 0 silent, 1 a progress bar, 2 a line per epoch "
        "(default: a bar on a terminal, else a line per epoch)",
    )
    add_config_arguments(parser.add_argument_group("training settings (stored in the run)"))
    add_pair_arguments(
        parser,
        data_help="tab-separated parallel corpus of a new run: a file or a glob of files, .gz read "
        "as gzip (default columns: the Tatoeba layout of --src/--tgt)",
        languages_help="source language code of a new run (default: zh; with --data, its "
        "Tatoeba column unless --src-column/--tgt-column are given)",
    )
    texts = parser.add_argument_group(
        "texts of --task lm and --task classify",
        "--data is a file of one text a line (lm) or of label<TAB>text lines (classify)",
    )
    texts.add_argument(
        "--column",
        help="lm: the TSV column of the text, a language of the Tatoeba layout (en, zh) or a "
        "0-based number (default: whole lines)",
    )
    texts.add_argument("--label-column", type=int, help="classify: 0-based label column (default: 0)")
    texts.add_argument("--text-column", type=int, help="classify: 0-based text column (default: 1)")
    texts.add_argument(
        "--language",
        help="language code of the text, for the tokenizer's coverage and default size "
        "(default: the --column language, else none)",
    )
    texts.add_argument("--vocab-size", type=int, help="tokenizer size (default: by language)")
    model = parser.add_argument_group(
        "new runs: model", "fields of the preset to change (a resumed run keeps its own model)"
    )
    for name, (kind, metavar, help_text) in MODEL_FLAGS.items():
        # A switch is --name / --no-name; left out, the preset's value stands.
        kind_options = (
            {"action": argparse.BooleanOptionalAction} if kind is bool
            else {"type": kind, "metavar": metavar}
        )
        model.add_argument(
            f"--{name.replace('_', '-')}", **kind_options,
            help=f"{help_text} (default: the preset's)",
        )
    group = parser.add_argument_group("new runs: split and tokenizers")
    group.add_argument(
        "--max-pairs", type=int,
        help="use only the first N pairs (lm, classify: texts) of the data, in file order, for a "
        "quick trial run (the files are then read one after the other)",
    )
    group.add_argument("--split-seed", type=int, default=0, help="seed of the split (default: 0)")
    group.add_argument(
        "--max-held-out", type=int, metavar="N",
        help="most examples kept in the validation split and in the test split each (the rest "
        "of their share trains), so that validation takes seconds on any corpus (default: "
        "2000)",
    )
    group.add_argument(
        "--vocab-sample", type=int, metavar="N",
        help="most training examples the tokenizers learn from, a sample chosen by hash (and "
        "the words the --dictionary filter sees) (default: 200000)",
    )
    group.add_argument(
        "--source-vocab-size", type=int,
        help="pieces of the source SentencePiece tokenizer (default: measured per language)",
    )
    group.add_argument(
        "--target-vocab-size", type=int,
        help="pieces of the target SentencePiece tokenizer (default: measured per language)",
    )
    group.add_argument(
        "--joint-vocabulary", action="store_true",
        help="one SentencePiece vocabulary for both languages, with tied embeddings (Press "
        "and Wolf, 2017), for languages that share a script",
    )
    group.add_argument(
        "--dictionary", metavar="TSV|auto|none", default="auto",
        help="word pairs (a TSV whose header names the two languages) added to the training "
        "stream when the word occurs in a sampled training source (every source of a corpus "
        "within --vocab-sample): glosses of the corpus's words, for a "
        "small corpus (+1.9 BLEU on the bundled one, docs/experiments.md); auto: the dictionary "
        "shipped for the language pair, if any (zh-en: data/cc-cedict, CC BY-SA 4.0) "
        "(default: auto)",
    )
    group.add_argument(
        "--bidirectional", action="store_true",
        help="train both directions in one model, a tag before each training source naming "
        "the output language (Johnson et al., 2017), so each pair teaches twice; the run still "
        "translates --src into --tgt (implies --joint-vocabulary)",
    )


def run(args):
    from keras_transformer.runs.folder import RunFolder
    from keras_transformer.training.config import TrainingConfig
    from keras_transformer.training.trainer import train

    run_dir = RunFolder(args.run)
    if args.init_from and not run_dir.exists():
        from keras_transformer.tasks.base import read_model_config

        _refuse_with_init(args)
        init_task = read_model_config(args.init_from)[0]["task"]
        task = args.task or init_task
    else:
        task = args.task or (run_dir.task if run_dir.exists() else DEFAULT_TASK)
    stored = run_dir.read_training_config()
    if args.config:
        stored = (stored or TrainingConfig.for_task(task)).replace(**read_settings(args.config))
    config = TrainingConfig.from_flags(args, stored=stored, task=task)
    from keras_transformer.tasks.loading import task_for

    data, prepare_options = task_for(task).data_from_args(args)
    model_overrides = {
        name: getattr(args, name) for name in MODEL_FLAGS if getattr(args, name) is not None
    }
    if run_dir.exists():
        _check_model_unchanged(args.run, run_dir.config["model"], model_overrides)
    else:  # checked before the split and the tokenizers are written
        from keras_transformer.models.config import preset

        preset(args.preset or DEFAULT_PRESET, task_for(task).backbone_shape, **model_overrides)
    prepare_options["model_overrides"] = model_overrides
    if data is not None and run_dir.exists():
        print(f"keras-transformer train: {args.run} is an existing run: it keeps its own split; "
              "the corpus options are not used.")
    result = train(
        args.run,
        config,
        data=data,
        preset=args.preset,
        task=task,
        prepare_options=prepare_options,
        init_from=args.init_from,
        minutes=args.minutes,
        strategy=args.strategy,
        devices=args.devices.split(",") if args.devices else None,
        verbose=args.verbose,
    )
    action = "resumed at step" if result.resumed else "started at step"
    print(
        f"keras-transformer train: {result.run_dir}: {action} {result.initial_step}, "
        f"now at step {result.step} after {result.epochs} epochs (stopped by {result.stopped_by})."
    )
    return 0


def read_settings(path):
    """The training settings of a YAML file, as `TrainingConfig` field names and values.

    Keys are a setting's field name (`token_budget`) or its flag name (`batch-tokens`,
    `batch_tokens`); an unknown key is a one-line error naming the accepted ones.
    """
    import dataclasses

    import yaml

    from keras_transformer.training.config import TrainingConfig
    from keras_transformer.training.config import flag_name

    with open(path, encoding="utf-8") as file:
        try:
            values = yaml.safe_load(file)
        except yaml.YAMLError as error:
            raise ValueError(f"--config {path} is not valid YAML: {str(error).splitlines()[0]}") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ValueError(f"--config {path} must hold a mapping of settings; received {type(values).__name__}.")
    names = {}
    for field in dataclasses.fields(TrainingConfig):
        for key in (field.name, flag_name(field), flag_name(field).replace("-", "_")):
            names[key] = field.name
    unknown = sorted(str(key) for key in values if key not in names)
    if unknown:
        raise ValueError(
            f"--config {path}: unknown settings {unknown}; accepted: "
            f"{sorted({flag_name(field) for field in dataclasses.fields(TrainingConfig)})}."
        )
    return {names[key]: value for key, value in values.items()}


def _refuse_with_init(args):
    """One line naming the options `--init-from` decides (the model and its vocabulary)."""
    names = ["preset", *MODEL_FLAGS, "source_vocab_size", "target_vocab_size", "joint_vocabulary",
             "vocab_size", "bidirectional"]
    given = [f"--{name.replace('_', '-')}" for name in names if getattr(args, name, None) not in (None, False)]
    if given:
        raise ValueError(
            f"{', '.join(given)}: the model and its vocabulary come from --init-from "
            f"{args.init_from}; leave {'it' if len(given) == 1 else 'them'} out, or train a new "
            "model without --init-from."
        )


def _as_flag(name, value, bare=False):
    """A model setting as its flag: `--intermediate-dim 32` (`32` when bare), `--no-norm-first`."""
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    return str(value) if bare else f"--{flag} {value}"


def _check_model_unchanged(run, stored_model, overrides):
    """Refuses model flags that differ from what the existing run was built with (or
    that name a stack its backbone lacks)."""
    from keras_transformer.models.config import BackboneConfig

    stored = BackboneConfig.from_dict(stored_model)
    changed = [
        f"{_as_flag(name, value)} (the run has {_as_flag(name, stored.setting(name), bare=True)})"
        for name, value in overrides.items() if stored.replace(**{name: value}) != stored
    ]
    if changed:
        raise ValueError(
            f"{run} is an existing run: its model cannot change, received {', '.join(changed)}; "
            "train another model in another folder."
        )
