"""`keras-transformer train`: train a translator on a parallel corpus into a run folder.

Example:
    keras-transformer train --preset small --data data/cmn-eng/cmn.txt \\
        --src zh --tgt en --run runs/zh-en --minutes 25

Running the same command again resumes the run from its last backup. On a resumed
run a training flag that is given overrides the stored setting (each difference is
printed, one line each); a flag not given keeps the stored setting. The training
flags are generated from `TrainingConfig`'s fields (names, types, defaults, help).
"""

from keras_transformer.data.corpus import add_pair_arguments
from keras_transformer.training.config import add_config_arguments
from keras_transformer.training.strategy import STRATEGIES

DEFAULT_LANGUAGES = ("zh", "en")
DEFAULT_PRESET = "small"


def add_arguments(parser):
    from keras_transformer.models.config import PRESETS

    parser.add_argument("--run", required=True, help="run folder (created, or resumed)")
    parser.add_argument(
        "--preset", default=None, choices=sorted(PRESETS),
        help=f"model preset of a new run (default: {DEFAULT_PRESET}; a resumed run keeps its own)",
    )
    parser.add_argument("--minutes", type=float, help="stop cleanly after this many minutes")
    parser.add_argument("--strategy", default="default", choices=STRATEGIES)
    parser.add_argument(
        "--devices", help="comma-separated devices of the mirrored strategy (default: all GPUs)"
    )
    parser.add_argument("--verbose", type=int, choices=(0, 1, 2), help="default: bar on a terminal")
    add_config_arguments(parser.add_argument_group("training settings (stored in the run)"))
    add_pair_arguments(
        parser,
        data_help="tab-separated parallel corpus of a new run (default columns: the Tatoeba "
        "layout of --src/--tgt)",
        languages_help="source language code of a new run (default: zh; with --data, its "
        "Tatoeba column unless --src-column/--tgt-column are given)",
    )
    group = parser.add_argument_group("new runs: split and tokenizers")
    group.add_argument("--max-pairs", type=int, help="use only the first N pairs of the corpus")
    group.add_argument("--split-seed", type=int, default=0, help="seed of the split (default: 0)")
    group.add_argument("--source-vocab-size", type=int, help="default: measured per language")
    group.add_argument("--target-vocab-size", type=int, help="default: measured per language")
    group.add_argument("--joint-vocabulary", action="store_true", help="one vocabulary for both")
    group.add_argument(
        "--dictionary", metavar="TSV", help="word pairs (header: the two language codes) added to "
        "training when the word occurs in a training source, e.g. data/cc-cedict/cedict.tsv",
    )


def run(args):
    from keras_transformer.data.corpus import pair_files
    from keras_transformer.runs import RunDir
    from keras_transformer.training.config import TrainingConfig
    from keras_transformer.training.trainer import train

    run_dir = RunDir(args.run)
    config = TrainingConfig.from_flags(args, stored=run_dir.read_training_config())
    data = pair_files(args, default_languages=DEFAULT_LANGUAGES)
    if data is not None and run_dir.exists():
        print(f"keras-transformer train: {args.run} is an existing run: it keeps its own split; "
              "the corpus options are not used.")
    src, tgt = args.src or DEFAULT_LANGUAGES[0], args.tgt or DEFAULT_LANGUAGES[1]
    result = train(
        args.run,
        config,
        data=data,
        src=src,
        tgt=tgt,
        preset=args.preset,
        prepare_options=dict(
            max_pairs=args.max_pairs,
            split_seed=args.split_seed,
            source_vocab_size=args.source_vocab_size,
            target_vocab_size=args.target_vocab_size,
            joint_vocabulary=args.joint_vocabulary,
            dictionary=args.dictionary,
        ),
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
