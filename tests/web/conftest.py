"""Fixtures of the web page tests: a tiny exported translator (and a tiny language
model and classifier) served on loopback, one headless Chromium (the browser tests
skip when Debian's chromium is absent)."""

import os
import shutil
import sys

import pytest

# Lets test modules import the helper module next to them by plain name.
sys.path.insert(0, os.path.dirname(__file__))

import web_helpers  # noqa: E402
import screenshot  # noqa: E402


@pytest.fixture(scope="session")
def exported_model(tmp_path_factory):
    """The base path of model "zh_en" (version 1, a tiny untrained translator)."""
    base = tmp_path_factory.mktemp("web_export")
    web_helpers.export_tiny_translator(base, tmp_path_factory.mktemp("web_tokenizers"))
    return base / web_helpers.MODEL_NAME


@pytest.fixture(scope="session")
def page_server(exported_model):
    """The embedded server with its default page, shared by the tests."""
    running = web_helpers.start_server(exported_model)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def task_server(tmp_path_factory):
    """The embedded server with an untrained language model and classifier."""
    base = tmp_path_factory.mktemp("web_task_export")
    web_helpers.export_tiny_task_models(base)
    running = web_helpers.start_models_server(
        base, [web_helpers.LM_NAME, web_helpers.CLASSIFIER_NAME])
    yield running
    running.stop()


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium (selenium WebDriver), shared by the tests."""
    reason = screenshot.browser_missing_reason()
    if reason:
        pytest.skip(reason)
    driver, profile = screenshot.start_chromium()  # Fails loudly without selenium.
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)
