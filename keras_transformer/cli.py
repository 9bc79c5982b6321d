"""The `keras-transformer` command line: one sub-command per step of the workflow.

Each sub-command lives in the module that owns its idea (`COMMANDS`); that module
defines `add_arguments(parser)` and `run(args)` and imports TensorFlow only inside
`run`. This module parses and dispatches:

- Fast help: the top-level `--help` lists the commands from the static table, and
  only the chosen command's module is imported to build its flags, so `--help`
  loads neither Keras nor TensorFlow.
- Quiet start-up: unless `--verbose` comes before the command, TensorFlow's
  start-up lines (oneDNN and CUDA-driver notices, "failed call to cuInit" on a
  machine without a GPU) are hidden; a new user would read them as errors.
- User errors: a mistake on the command line, a missing or wrong file, a server
  that does not answer, each prints one line `keras-transformer CMD: error: ...`
  and exits with status 2 (130 after Ctrl-C); `--verbose` shows the traceback.
"""

import argparse
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import os
import sys

# name → (module, help). Each module defines `add_arguments(parser)` and `run(args)`.
COMMANDS = {
    "summary": ("keras_transformer.models.summary", "print a preset model's layers and sizes"),
    "train": ("keras_transformer.training.command", "train a translator, a language model or a classifier"),
    "export": ("keras_transformer.export.command", "export a run as a versioned SavedModel for TF Serving"),
    "translate": ("keras_transformer.translate", "translate sentences with a run folder or a server"),
    "serve": ("keras_transformer.serving.command", "serve exported models over TF Serving's REST and gRPC APIs"),
    "average": ("keras_transformer.runs.average_command", "average a run's epoch checkpoints into average.weights.h5"),
    "evaluate": ("keras_transformer.evaluation.command", "BLEU/chrF, perplexity or accuracy/F1 of a run or export"),
    "plot-attention": ("keras_transformer.plots.attention_command", "draw a translation's attention as layers x heads heatmaps"),
    "plot-history": ("keras_transformer.plots.history_command", "draw a run's loss, accuracy and learning-rate curves"),
}

# The errors a user causes (bad values, missing or existing files, refused
# connections: ConnectionError and PermissionError are OSErrors). Anything else
# is a bug and keeps its traceback.
USER_ERRORS = (ValueError, OSError)

# Exit statuses: argparse's for a usage error, the shell's for Ctrl-C (128 + SIGINT).
USAGE_ERROR = 2
INTERRUPTED = 130

# TF_CPP_MIN_LOG_LEVEL=3 hides C++ log lines below FATAL, among them
# "failed call to cuInit" (an ERROR); 2 would still show it.
QUIET_TF_LOG_LEVEL = "3"


class ArgumentParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose usage errors are one line, without the usage."""

    def error(self, message):
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def chosen_command(argv):
    """The command named in `argv` (the first word that is not a global flag), or None."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command=None):
    """The parser of the whole command line, with the flags of `command` only.

    Every command is listed (from `COMMANDS`), but only `command`'s module is
    imported, to add its flags; the others stay unloaded.
    """
    parser = ArgumentParser(
        prog="keras-transformer",
        description="Build, train, export and serve Transformer translators, language models and classifiers.",
    )
    parser.add_argument(
        "--verbose",
        dest="cli_verbose",  # `train --verbose` is Keras' progress setting
        action="store_true",
        help="show TensorFlow's start-up log lines, and a traceback on errors",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        subparser = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module_name).add_arguments(subparser)
    return parser


def one_line(error):
    """The message of `error` on one line, for `keras-transformer CMD: error: ...`."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        # "[Errno 2] No such file or directory: 'x'" reads better as "x: No such ...".
        return f"{error.filename}: {error.strerror}"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " ".join(lines) or type(error).__name__


@contextlib.contextmanager
def _stderr_to_devnull():
    """Points file descriptor 2 at /dev/null: shared libraries write there directly."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class _SilentLoader(importlib.abc.Loader):
    """Runs another loader's `exec_module` with stderr silenced."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        with _stderr_to_devnull():
            self._loader.exec_module(module)

    def __getattr__(self, name):  # resource readers and the like
        return getattr(self._loader, name)


class _SilentTensorFlowImport(importlib.abc.MetaPathFinder):
    """Imports the `tensorflow` package, whenever a command first needs it, silently.

    While its shared libraries load they print notices (oneDNN, CUDA drivers,
    absl's "All log messages before absl::InitializeLog() is called ...") to the
    stderr descriptor, before any log level is read. Only that import is silenced:
    errors raised by it still propagate as exceptions.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _SilentLoader(spec.loader)
        return spec


@contextlib.contextmanager
def quiet_tensorflow():
    """Hides TensorFlow's start-up lines and C++ logs for the duration of a command."""
    previous = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = QUIET_TF_LOG_LEVEL
    finder = None
    if "tensorflow" not in sys.modules:
        finder = _SilentTensorFlowImport()
        sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)
        if previous is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        else:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = previous


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(chosen_command(argv)).parse_args(argv)
    verbose = args.cli_verbose
    try:
        with contextlib.nullcontext() if verbose else quiet_tensorflow():
            module = importlib.import_module(COMMANDS[args.command][0])
            return module.run(args) or 0
    except KeyboardInterrupt:
        if verbose:
            raise
        return INTERRUPTED
    except USER_ERRORS as error:
        if verbose:
            raise
        print(f"keras-transformer {args.command}: error: {one_line(error)}", file=sys.stderr)
        return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
