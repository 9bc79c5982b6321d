"""Command-line arguments that several commands share (the layer below `cli`).

Each command module adds its own flags in `add_arguments(parser)`; a flag that
more than one command reads is defined here once. Imports only the standard
library and light modules, so `--help` stays fast.
"""

from keras_transformer.runs.weights import DEFAULT_AVERAGE_LAST


def add_weights_argument(parser):
    """`--weights`: which weights of the run a command reads (`RunFolder.weights`)."""
    parser.add_argument(
        "--weights", default=None,
        help="weights of the run: best (lowest validation loss; the last weights if none "
        "was recorded), last (final, else the newest checkpoint), average (average.weights.h5, "
        f"computed from the last {DEFAULT_AVERAGE_LAST} epoch checkpoints if missing), or a "
        "weights file (default: the average that training writes when it ends, while no newer "
        "checkpoint exists; else best)",
    )
