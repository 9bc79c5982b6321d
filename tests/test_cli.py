"""The command line: fast help, quiet start-up, one-line user errors."""

import http.server
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import types

import pytest

from keras_transformer import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("tensorflow", "keras", "tensorflow_text")
# A line of TensorFlow's C++ logging (absl format: I/W/E, month and day, time).
TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} ", re.MULTILINE)
TF_STARTUP_NOTICES = ("cuInit", "oneDNN", "absl::InitializeLog", "cuda drivers")

# Asks for `--help` (of one command, or of the whole CLI) as `keras-transformer`
# would, then prints the heavy modules loaded and the process's CPU time (its own
# measure of import cost, not stretched by other jobs sharing the machine).
HELP_DRIVER = textwrap.dedent(
    """
    import contextlib, io, json, sys, time
    from keras_transformer import cli
    with contextlib.redirect_stdout(io.StringIO()) as help_text:
        try:
            cli.main([*sys.argv[1:], "--help"])
        except SystemExit as exit:
            code = exit.code
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
    print(json.dumps({{"code": code, "heavy": heavy, "cpu_seconds": time.process_time(),
                       "help": help_text.getvalue()}}))
    """
).format(heavy=HEAVY)


def _env(**changes):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # The tests' own conftest sets a level; the command must choose its own.
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.update(changes)
    return env


def _keras_transformer(*args, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "keras_transformer", *map(str, args)],
        capture_output=True, text=True, env=env or _env(), cwd=ROOT, timeout=timeout,
    )


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _assert_one_line_error(result, command, *words):
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"keras-transformer {command}: error: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]


# ------------------------------------------------------------------ fast --help


@pytest.mark.parametrize("command", [None, *cli.COMMANDS])
def test_help_imports_neither_keras_nor_tensorflow(command):
    args = [] if command is None else [command]
    result = subprocess.run(
        [sys.executable, "-c", HELP_DRIVER, *args],
        capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["code"] == 0
    assert report["heavy"] == [], f"`{command} --help` imported {report['heavy'][:5]}"
    # Importing TensorFlow alone costs several CPU-seconds; the help costs ~0.1 s.
    assert report["cpu_seconds"] < 1.0, report["cpu_seconds"]
    if command is None:
        for name, (_, help_text) in cli.COMMANDS.items():
            assert name in report["help"] and help_text in report["help"]
        assert "--verbose" in report["help"]
    else:
        assert f"usage: keras-transformer {command}" in report["help"]


def test_python_dash_m_prints_the_help_of_every_command():
    result = _keras_transformer("--help", timeout=60)
    assert result.returncode == 0 and result.stderr == ""
    for name in cli.COMMANDS:
        assert name in result.stdout


def test_only_the_chosen_commands_flags_are_built():
    parser = cli.build_parser("summary")
    assert parser.parse_args(["summary", "--preset", "tiny"]).preset == "tiny"
    with pytest.raises(SystemExit):  # plot-history's flags were not added
        parser.parse_args(["plot-history", "--run", "x"])


@pytest.mark.parametrize(
    "argv, command",
    [
        (["train", "--run", "x"], "train"),
        (["--verbose", "summary"], "summary"),
        (["--help"], None),
        (["unknown"], None),
        ([], None),
    ],
)
def test_chosen_command_is_the_first_word_after_the_global_flags(argv, command):
    assert cli.chosen_command(argv) == command


# ---------------------------------------------------------------- quiet start


def test_a_command_that_loads_tensorflow_prints_no_start_up_lines():
    # TF_CPP_MIN_LOG_LEVEL=0 shows every C++ line: the command must override it.
    result = _keras_transformer(
        "summary", "--preset", "tiny", "--source-vocab-size", 50, "--target-vocab-size", 50,
        env=_env(TF_CPP_MIN_LOG_LEVEL="0"),
    )
    assert result.returncode == 0, result.stderr
    assert "Total params" in result.stdout
    for notice in TF_STARTUP_NOTICES:
        assert notice not in result.stderr
    assert not TF_LOG_LINE.search(result.stderr), result.stderr


def test_verbose_shows_tensorflows_start_up_lines():
    result = _keras_transformer(
        "--verbose", "summary", "--preset", "tiny", env=_env(TF_CPP_MIN_LOG_LEVEL="0"),
    )
    assert result.returncode == 0, result.stderr
    assert TF_LOG_LINE.search(result.stderr), result.stderr


# ------------------------------------------- user errors, through a stand-in command


@pytest.fixture
def stand_in(monkeypatch):
    """Registers a `stand-in` command whose `run` calls the test's function."""
    module = types.ModuleType("stand_in_command")
    module.add_arguments = lambda parser: parser.add_argument("--flag", default="x")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(cli.COMMANDS, "stand-in", (module.__name__, "a command for tests"))

    def use(run):
        module.run = run
        return module

    return use


@pytest.mark.parametrize(
    "error, message",
    [
        (FileExistsError("export/zh_en/1 already exists; pass --overwrite"),
         "export/zh_en/1 already exists; pass --overwrite"),
        (FileNotFoundError(2, "No such file or directory", "runs/missing"),
         "runs/missing: No such file or directory"),
        (ConnectionRefusedError("nothing listens on 127.0.0.1:9"), "nothing listens on 127.0.0.1:9"),
        (PermissionError("export/ is read-only"), "export/ is read-only"),
        (ValueError("`--beam` must be positive;\nreceived 0."), "`--beam` must be positive; received 0."),
    ],
)
def test_user_errors_print_one_line_and_exit_2(stand_in, capsys, error, message):
    def run(args):
        raise error

    stand_in(run)
    assert cli.main(["stand-in"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"keras-transformer stand-in: error: {message}\n"


def test_verbose_shows_the_traceback_of_a_user_error(stand_in):
    def run(args):
        raise FileExistsError("export/zh_en/1 already exists")

    stand_in(run)
    with pytest.raises(FileExistsError):
        cli.main(["--verbose", "stand-in"])


def test_ctrl_c_exits_130_without_a_traceback(stand_in, capsys):
    def run(args):
        raise KeyboardInterrupt

    stand_in(run)
    assert cli.main(["stand-in"]) == 130
    assert capsys.readouterr().err == ""


def test_bugs_keep_their_traceback(stand_in):
    def run(args):
        raise TypeError("a bug, not a user error")

    stand_in(run)
    with pytest.raises(TypeError):
        cli.main(["stand-in"])


@pytest.mark.parametrize("verbose", [False, True])
def test_tensorflow_log_level_is_forced_only_without_verbose(stand_in, monkeypatch, verbose):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    seen = {}

    def run(args):
        seen["level"] = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
        seen["flag"] = args.flag

    stand_in(run)
    assert cli.main([*(["--verbose"] if verbose else []), "stand-in", "--flag", "y"]) == 0
    assert seen == {"level": "0" if verbose else cli.QUIET_TF_LOG_LEVEL, "flag": "y"}
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"  # restored afterwards


# ------------------------------------------------ user errors of the real commands


def test_bad_flag_value_is_one_line():
    result = _keras_transformer("summary", "--preset", "huge", timeout=60)
    _assert_one_line_error(result, "summary", "--preset", "huge", "tiny")


def test_missing_required_flag_is_one_line():
    result = _keras_transformer("export", "--name", "zh_en", timeout=60)
    _assert_one_line_error(result, "export", "--run")


def test_a_bad_value_found_after_tensorflow_loads_is_one_line_and_quiet():
    result = _keras_transformer("summary", "--preset", "tiny", "--source-vocab-size", 0)
    _assert_one_line_error(result, "summary", "source_vocab_size")


@pytest.mark.parametrize(
    "args, command",
    [
        (["translate", "--run", "{missing}", "hello"], "translate"),
        (["export", "--run", "{missing}", "--name", "zh_en"], "export"),
        (["evaluate", "--run", "{missing}"], "evaluate"),
        (["plot-history", "--run", "{missing}"], "plot-history"),
    ],
)
def test_a_missing_run_folder_is_one_line(tmp_path, args, command):
    missing = tmp_path / "no-such-run"
    result = _keras_transformer(*[arg.format(missing=missing) for arg in args])
    _assert_one_line_error(result, command, str(missing))


@pytest.mark.parametrize("scheme", ["http://", ""])  # REST, gRPC
def test_translate_from_a_port_where_nothing_listens_is_one_line(scheme):
    target = f"{scheme}127.0.0.1:{_free_port()}"
    result = _keras_transformer("translate", "--server", target, "--model", "zh_en", "你好",
                                timeout=120)
    _assert_one_line_error(result, "translate")


def test_translate_refuses_a_coverage_penalty_for_a_server_in_one_line():
    # A served model searches as it was exported; the flag would be silently ignored.
    result = _keras_transformer("translate", "--server", f"127.0.0.1:{_free_port()}", "你好",
                                "--coverage", "0.4", timeout=60)
    _assert_one_line_error(result, "translate", "--coverage belongs to --run", "export --coverage")


class _NoSuchModel(http.server.BaseHTTPRequestHandler):
    """Answers as TF Serving does for a model it does not serve."""

    def _not_found(self):
        body = json.dumps({"error": "Servable not found for request: Latest(nope)"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _not_found

    def log_message(self, *args):
        pass


def test_translate_with_an_unknown_model_is_one_line():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoSuchModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = _keras_transformer(
            "translate", "--server", f"http://127.0.0.1:{server.server_port}", "--model", "nope",
            "你好", timeout=120,
        )
    finally:
        server.shutdown()
        server.server_close()
    _assert_one_line_error(result, "translate", "nope")


def test_an_unknown_training_task_is_one_line_listing_the_tasks(tmp_path):
    result = _keras_transformer("train", "--task", "summarize", "--run", tmp_path / "run", timeout=60)
    _assert_one_line_error(result, "train", "summarize", "translate", "lm", "classify")


@pytest.mark.parametrize("task", ["lm", "classify"])
def test_a_missing_data_file_of_a_task_is_one_line(tmp_path, task):
    missing = tmp_path / "no-such-file.txt"
    result = _keras_transformer("train", "--task", task, "--data", missing, "--run", tmp_path / "run")
    _assert_one_line_error(result, "train", str(missing))
