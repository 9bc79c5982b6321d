"""Shared fixtures: tiny SavedModels built once, servers on loopback ports."""

import os
import sys

import pytest

# Lets test modules import the helper modules next to them by plain name.
sys.path.insert(0, os.path.dirname(__file__))

import tiny_models  # noqa: E402
from serving_helpers import MAX_BODY  # noqa: E402
from serving_helpers import MAX_INSTANCES  # noqa: E402
from keras_transformer.serving import config as config_lib  # noqa: E402
from keras_transformer.serving import server as server_lib  # noqa: E402


@pytest.fixture(scope="session")
def saved_versions(tmp_path_factory):
    """{1: path, 2: path} of the two tiny model versions, saved once."""
    root = tmp_path_factory.mktemp("saved")
    return {v: tiny_models.save_tiny_model(str(root / f"v{v}"), v) for v in (1, 2)}


@pytest.fixture(scope="session")
def api_server(saved_versions, tmp_path_factory):
    """One server for the API tests: model 'tiny' (versions 1 and 2, labels
    stable=1 and canary=2) and model 'other' (version 7, a copy of 1)."""
    root = tmp_path_factory.mktemp("api")
    for version, source in saved_versions.items():
        tiny_models.install_version(source, str(root / "tiny"), version)
    tiny_models.install_version(saved_versions[1], str(root / "other"), 7)
    static = root / "static"
    static.mkdir()
    (static / "index.html").write_text("<html>translate page</html>")
    model_config = config_lib.parse_model_config(f"""
        model_config_list {{
          config {{ name: 'tiny' base_path: '{root / "tiny"}' model_platform: 'tensorflow'
                    model_version_policy {{ all {{}} }}
                    version_labels {{ key: 'stable' value: 1 }}
                    version_labels {{ key: 'canary' value: 2 }} }}
          config {{ name: 'other' base_path: '{root / "other"}' model_platform: 'tensorflow' }}
        }}""")
    options = server_lib.ServerOptions(
        model_config=model_config, port=0, rest_api_port=0, poll_seconds=0,
        limits=config_lib.ServingLimits(max_body_bytes=MAX_BODY, max_instances=MAX_INSTANCES),
        static_dir=str(static))
    with server_lib.ServerThread(options) as running:
        yield running


@pytest.fixture
def one_version(saved_versions, tmp_path):
    """A model base path holding version 1 of the tiny model, for a server of one's own."""
    base = str(tmp_path / "tiny")
    tiny_models.install_version(saved_versions[1], base, 1)
    return base
