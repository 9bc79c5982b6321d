"""Writing files atomically: to a temporary name in the same folder, then a rename.

A process killed at any moment (SIGKILL, power loss after the data is synced) leaves
either the previous file or the new one, never half of one, because `os.replace`
within one file system is atomic. Every file the package writes for a later step
(run configs, histories, weights, evaluation records) goes through `atomic_path`.

Standard library only.

Example:
    >>> write_json("runs/zh-en/best.json", {"epoch": 7})  # doctest: +SKIP
    >>> with atomic_path("runs/zh-en/best.weights.h5") as temporary:  # doctest: +SKIP
    ...     model.save_weights(temporary)
"""

import contextlib
import json
import os


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path beside `path`; renames it onto `path` on success.

    The temporary name keeps `path`'s suffix (Keras picks a format by suffix) and
    starts with a dot, so folder listings by pattern do not see it. On an error the
    temporary file is removed and `path` is left as it was.
    """
    directory, name = os.path.split(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary = os.path.join(directory, f".tmp-{os.getpid()}-{name}")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically, synced to disk before the rename."""
    with atomic_path(path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())


def write_lines(path, lines):
    """Writes one line per string (each ended by a newline) atomically."""
    write_text(path, "".join(f"{line}\n" for line in lines))


def write_json(path, value, indent=2):
    """Writes `value` as indented JSON (UTF-8, non-ASCII kept, key order kept) atomically."""
    write_text(path, json.dumps(value, indent=indent, ensure_ascii=False) + "\n")


def read_json(path):
    """The parsed JSON file at `path`, with an error naming the file if it is not JSON."""
    with open(path, encoding="utf-8") as file:
        try:
            return json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON: {error}") from None
