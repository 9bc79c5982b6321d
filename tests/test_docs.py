"""The documentation covers the public API, and the project speaks in the present tense.

The site itself is built by `mkdocs build --strict` in CI (`.ci/run`), which fails on a
broken reference or a page missing from the navigation; these tests check what a
build cannot: that every public name has a reference entry, and that no document or
source file narrates its own history.
"""

import importlib
import pathlib
import re

import pytest

import keras_transformer

ROOT = pathlib.Path(__file__).resolve().parents[1]
API_PAGES = ROOT / "docs" / "api"
# A mkdocstrings entry: `::: keras_transformer.layers.encoder.EncoderBlock` on its own line.
REFERENCE = re.compile(r"^:::\s+(keras_transformer(?:\.\w+)+)\s*$", re.MULTILINE)


def api_references():
    """{public name: dotted path} of every mkdocstrings entry in docs/api/*.md."""
    references = {}
    for page in sorted(API_PAGES.glob("*.md")):
        for path in REFERENCE.findall(page.read_text(encoding="utf-8")):
            references.setdefault(path.rsplit(".", 1)[1], []).append(path)
    return references


def test_every_public_name_has_a_reference_entry():
    documented = set(api_references())
    public = set(keras_transformer.__all__)
    assert not public - documented, (
        f"public names without an entry in docs/api/*.md: {sorted(public - documented)}")
    assert not documented - public, (
        f"docs/api/*.md documents names not in keras_transformer.__all__: "
        f"{sorted(documented - public)}")


def test_each_reference_entry_is_the_public_object():
    for name, paths in api_references().items():
        assert len(paths) == 1, f"{name} is documented more than once: {paths}"
        module, attribute = paths[0].rsplit(".", 1)
        documented = getattr(importlib.import_module(module), attribute)
        assert documented is getattr(keras_transformer, name), (
            f"docs/api documents {paths[0]}, but keras_transformer.{name} is another object")


def test_readme_is_short_and_its_links_resolve():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # A first-time user's page: what, install, two commands, a few examples, links.
    assert len(readme.splitlines()) <= 200, "README.md is over 200 lines: move detail to docs/"
    targets = re.findall(r"\]\(((?:docs/|CHANGELOG)[^)#]*)", readme)
    assert targets, "README.md links into no documentation page"
    missing = [target for target in targets if not (ROOT / target).is_file()]
    assert not missing, f"README.md links to missing files: {missing}"


# Narration: a document or comment that tells the project's history instead of the
# reason for how things are. Dates and commits belong in docs/experiments.md's table,
# results in docs/results.md; elsewhere the text says why, in the present tense.
NARRATION = [
    re.compile(pattern, re.IGNORECASE) for pattern in (
        r"\bsessions? \d",                              # a working sequence's numbering
        r"\b(?:since|until) \d{4}-\d\d-\d\d",           # a change told by its date
        r"\bthe (?:previous|old|former) (?:defaults?|recipes?|designs?)\b",
        r"\b(?:defaults?|recipes?|presets?'s?) then\b",
        r"\b(?:was|were)\b[^.\n]{0,40}\bbefore\b",      # a past state set against today
        r"\bformerly\b",
    )
]
# Where the project speaks of itself. CHANGELOG.md tells what changed, by design.
SCANNED = [
    "README.md", "docs", "keras_transformer", "tests", "bench", "scripts", "serving",
    "export/README.md",
]
SUFFIXES = {".md", ".py", ".sh", ".txt", ".yml", ".yaml", ".config", ".html", ".js", ".css"}


def narration(text):
    """The matches of the narration patterns in `text`, as (line number, match)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        found += [(number, match.group(0)) for pattern in NARRATION
                  for match in pattern.finditer(line)]
    return found


def scanned_files():
    for entry in SCANNED:
        path = ROOT / entry
        if path.is_file():
            yield path
        else:
            yield from (file for file in sorted(path.rglob("*"))
                        if file.suffix in SUFFIXES and "__pycache__" not in file.parts)


@pytest.mark.parametrize("text", [
    "the preset's d_ff is 512 since sess" + "ion 25",
    "ReLU (SiLU since Sess" + "ions 34-35)",
    "a learning-rate scale of 0.5 sin" + "ce 2026-12-03",
    "dropout 0.1, the " + "previous default",
    "the defaults " + "then (--dropout 0.1)",
    "the feed-forward width wa" + "s 1,024 before",
    "our layers, form" + "erly Keras' EinsumDense",
])
def test_narration_patterns_catch_history(text):
    assert narration(text), f"not caught: {text!r}"


@pytest.mark.parametrize("text", [
    "SiLU: +0.46 test BLEU over two seeds; see the experiment record.",
    "| 2026-12-06 | 5994e7d | SiLU in the feed-forward layers | kept |",
    "A session of aiohttp.ClientSession() is closed before the loop ends.",
    "The backup is written before the checkpoint, so a kill leaves one of them.",
])
def test_narration_patterns_pass_present_tense(text):
    assert not narration(text), f"flagged: {narration(text)}"


def test_no_narration_in_the_project():
    found = [f"{path.relative_to(ROOT)}:{number}: {match!r}"
             for path in scanned_files()
             for number, match in narration(path.read_text(encoding="utf-8"))]
    assert not found, "history told in the present-tense documents and code:\n" + "\n".join(found)
