"""`keras-transformer train`: train a translator on a parallel corpus into a run folder.

Example:
    keras-transformer train --preset small --data data/cmn-eng/cmn.txt \\
        --src zh --tgt en --run runs/zh-en --minutes 25

Running the same command again resumes the run from its last backup.
"""

from keras_transformer.models.config import PRESETS
from keras_transformer.training.strategy import STRATEGIES

MIXED_PRECISION_CHOICES = ("none", "mixed_bfloat16", "mixed_float16")


def _save_freq(text):
    return "epoch" if text == "epoch" else int(text)


def add_arguments(parser):
    parser.add_argument("--run", required=True, help="run folder (created, or resumed)")
    parser.add_argument("--data", help="tab-separated parallel corpus (first run only)")
    parser.add_argument("--src", default="zh", help="source language code (default: zh)")
    parser.add_argument("--tgt", default="en", help="target language code (default: en)")
    parser.add_argument(
        "--preset", default=None, choices=sorted(PRESETS),
        help="model preset of a new run (default: small; a resumed run keeps its own)",
    )
    parser.add_argument("--minutes", type=float, help="stop cleanly after this many minutes")
    parser.add_argument("--epochs", type=int, help="total epochs of the run (default: 1000)")
    parser.add_argument("--batch-tokens", type=int, help="tokens per global batch (default: 4096)")
    parser.add_argument(
        "--xla", dest="jit_compile", action="store_true", default=None,
        help="compile the training step with XLA (default: by device)",
    )
    parser.add_argument("--no-xla", dest="jit_compile", action="store_false")
    parser.add_argument(
        "--mixed-precision", choices=MIXED_PRECISION_CHOICES,
        help="dtype policy (default: by device: mixed_bfloat16 on a GPU or a CPU with "
        "bfloat16 instructions, else none)",
    )
    parser.add_argument("--strategy", default="default", choices=STRATEGIES)
    parser.add_argument(
        "--devices", help="comma-separated devices of the mirrored strategy (default: all GPUs)"
    )
    parser.add_argument("--seed", type=int, help="seed of weights and data order (default: 0)")
    parser.add_argument("--warmup-steps", type=int, help="learning-rate warmup (default: 250)")
    parser.add_argument("--lr-scale", type=float, help="learning-rate schedule factor (default: 0.3)")
    parser.add_argument("--clipnorm", type=float, help="global gradient-norm clip (default: none)")
    parser.add_argument("--label-smoothing", type=float, help="default: 0.1")
    parser.add_argument(
        "--save-freq", type=_save_freq,
        help="steps between checkpoints, or 'epoch' (default: 200, and every epoch end)",
    )
    parser.add_argument("--keep-checkpoints", type=int, help="default: 3")
    parser.add_argument("--patience", type=int, help="early-stopping epochs, 0 = off (default: 5)")
    group = parser.add_argument_group("new runs: corpus, split and tokenizers")
    group.add_argument("--max-pairs", type=int, help="use only the first N pairs of the corpus")
    group.add_argument("--src-column", type=int, help="0-based source column (default: by --src)")
    group.add_argument("--tgt-column", type=int, help="0-based target column")
    group.add_argument("--split-seed", type=int, default=0)
    group.add_argument("--source-vocab-size", type=int, help="default: measured per language")
    group.add_argument("--target-vocab-size", type=int)
    group.add_argument("--joint-vocabulary", action="store_true")
    parser.add_argument("--verbose", type=int, choices=(0, 1, 2), help="default: bar on a terminal")


def run(args):
    from keras_transformer.training.trainer import train

    result = train(
        args.run,
        data_path=args.data,
        src=args.src,
        tgt=args.tgt,
        preset=args.preset,
        minutes=args.minutes,
        epochs=args.epochs,
        token_budget=args.batch_tokens,
        jit_compile=args.jit_compile,
        mixed_precision=args.mixed_precision,
        strategy=args.strategy,
        devices=args.devices.split(",") if args.devices else None,
        seed=args.seed,
        warmup_steps=args.warmup_steps,
        lr_scale=args.lr_scale,
        clipnorm=args.clipnorm,
        label_smoothing=args.label_smoothing,
        save_freq=args.save_freq,
        keep_checkpoints=args.keep_checkpoints,
        patience=args.patience,
        prepare_options=dict(
            source_column=args.src_column,
            target_column=args.tgt_column,
            max_pairs=args.max_pairs,
            split_seed=args.split_seed,
            source_vocab_size=args.source_vocab_size,
            target_vocab_size=args.target_vocab_size,
            joint_vocabulary=args.joint_vocabulary,
        ),
        verbose=args.verbose,
    )
    action = "resumed at step" if result.resumed else "started at step"
    print(
        f"keras-transformer train: {result.run_dir}: {action} {result.initial_step}, "
        f"now at step {result.step} after {result.epochs} epochs (stopped by {result.stopped_by})."
    )
    return 0
