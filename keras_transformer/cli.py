"""The `keras-transformer` command line: one sub-command per step of the workflow.

Each sub-command lives in the module that owns its idea; this module only parses
arguments and dispatches, importing the heavy modules lazily so `--help` is fast.
"""

import argparse
import importlib
import os
import sys

# Quiet TensorFlow's start-up logs unless the user asked for them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# name → (module, help). Each module defines `add_arguments(parser)` and `run(args)`.
COMMANDS = {
    "summary": ("keras_transformer.models.summary", "print a preset model's layers and sizes"),
    "train": ("keras_transformer.training.command", "train a translator on a parallel corpus"),
    "export": ("keras_transformer.export.command", "export a run as a versioned SavedModel for TF Serving"),
    "translate": ("keras_transformer.translate", "translate sentences with a run folder or a server"),
    "serve": ("keras_transformer.serving.command", "serve exported models over TF Serving's REST and gRPC APIs"),
    "evaluate": ("keras_transformer.evaluation.command", "BLEU and chrF of a run folder or an export (sacrebleu)"),
    "plot-attention": ("keras_transformer.plots.attention_command", "draw a translation's attention as layers x heads heatmaps"),
    "plot-history": ("keras_transformer.plots.history_command", "draw a run's loss, accuracy and learning-rate curves"),
}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-transformer",
        description="Build, train, export and serve Transformer translators.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        subparser = subparsers.add_parser(name, help=help_text, description=help_text)
        subparser.set_defaults(_module=module_name)
        importlib.import_module(module_name).add_arguments(subparser)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    module = importlib.import_module(args._module)
    try:
        return module.run(args) or 0
    except (ValueError, FileNotFoundError) as error:
        print(f"keras-transformer {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
