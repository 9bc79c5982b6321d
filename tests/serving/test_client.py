"""The serving client's errors: one clear line for the mistakes a user makes."""

import socket

import pytest

from keras_transformer.serving import client as client_lib


def closed_port():
    with socket.socket() as probe:  # Bound, then closed: nothing listens there.
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_unknown_model_is_model_not_found_error(api_server, protocol):
    target = api_server.rest_url if protocol == "rest" else api_server.grpc_target
    with client_lib.TranslationClient(target, model_name="no_such_model", timeout=30) as client:
        with pytest.raises(client_lib.ModelNotFoundError) as raised:
            client.translate(["hello"])
    assert isinstance(raised.value, ValueError)
    message = str(raised.value)
    assert "'no_such_model' is not served at" in message and "\n" not in message


@pytest.mark.parametrize("target", [
    "http://127.0.0.1:{port}",  # Nothing listening (REST).
    "127.0.0.1:{port}",  # Nothing listening (gRPC).
    "http://no-such-host.invalid:8501",  # Does not resolve.
    "http://127.0.0.1:notaport",  # Malformed.
    "no-such-host.invalid:8500",
])
def test_unreachable_server_is_one_line_connection_error(target):
    target = target.format(port=closed_port())
    with client_lib.TranslationClient(target, model_name="zh_en", timeout=10) as client:
        with pytest.raises(client_lib.ServerUnreachableError) as raised:
            client.translate(["hello"])
    assert isinstance(raised.value, ConnectionError)
    message = str(raised.value)
    assert message.startswith(f"Cannot reach a model server at '{target}'")
    assert "\n" not in message
