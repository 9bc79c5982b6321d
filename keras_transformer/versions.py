"""The version-folder convention shared by the exporter and the server.

A model's base path holds one child folder per version, named by a non-negative
integer (`export/zh_en/3/saved_model.pb`). Any other child is ignored, which is
what makes "write under a temporary name, then rename" safe: TF Serving polls
the base path and would otherwise load a half-written version.

The model-name rule lives here too: a model's name is both a folder under the
export base and a URL segment (`/v1/models/<name>`), so the exporter and the
server must agree on it.

This module imports only the standard library so the exporter and tools can
use it without TensorFlow.
"""

import os
import re

# TF Serving parses version names as int64; larger numbers are not versions.
_MAX_VERSION = 2**63 - 1

# Letters, digits, "_", "." and "-", not starting with "." or "-": safe as a
# folder name (never "." or "..", never a hidden file or a flag) and as a URL
# path segment.
_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
MODEL_NAME_RULE = "letters, digits, '_', '.' or '-', not starting with '.' or '-'"


def is_model_name(name):
    """Whether `name` follows the model-name rule (`MODEL_NAME_RULE`).

    Args:
        name: a candidate model name (or version label).

    Returns:
        True for names such as "zh_en" or "zh-en.v2"; False for "", ".", "..",
        "-x", "a/b", "a b", non-ASCII letters and anything that is not a str.
    """
    return isinstance(name, str) and _MODEL_NAME.fullmatch(name) is not None


def parse_version(name):
    """Returns the version number a folder name stands for, or None.

    Args:
        name: a folder name (not a path).

    Returns:
        The integer version, or None when `name` is not made only of ASCII
        digits or does not fit in an int64.
    """
    if not name or not name.isascii() or not name.isdigit():
        return None
    version = int(name)
    return version if version <= _MAX_VERSION else None


def is_version_dir(base_path, name):
    """Whether `base_path/name` is a version folder.

    Args:
        base_path: the model's base path.
        name: a child name of `base_path`.

    Returns:
        True when `name` is an integer and `base_path/name` is a directory.
    """
    return parse_version(name) is not None and os.path.isdir(
        os.path.join(base_path, name))


def version_paths(base_path):
    """Maps each version under `base_path` to its folder.

    When two names parse to the same number (`7` and `007`) the plain decimal
    spelling wins, so the answer does not depend on directory order.

    Args:
        base_path: the model's base path; a missing folder has no versions.

    Returns:
        A dict {version: path}, in increasing version order.
    """
    try:
        names = os.listdir(base_path)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found = {}
    for name in sorted(names, key=lambda n: (len(n), n), reverse=True):
        if is_version_dir(base_path, name):
            found[parse_version(name)] = os.path.join(base_path, name)
    return dict(sorted(found.items()))


def list_versions(base_path):
    """Lists the versions under a model's base path.

    Args:
        base_path: the model's base path.

    Returns:
        The sorted list of integer versions (empty when there are none).

    Example:
        >>> list_versions("export/zh_en")  # export/zh_en/{1,2,tmp-3}
        [1, 2]
    """
    return list(version_paths(base_path))


def next_version(base_path):
    """The version number a new export should take: one above the latest."""
    versions = list_versions(base_path)
    return versions[-1] + 1 if versions else 1
