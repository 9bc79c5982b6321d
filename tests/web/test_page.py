"""The translation page end to end: the embedded server serves it, headless Chromium uses it.

The page must show what the TF Serving REST API returns (translation, n-best list,
cross-attention over exactly the returned pieces) and put every failure in words.
"""

import argparse

import numpy as np
import pytest
from selenium.webdriver.common.by import By

import screenshot
from web_helpers import MODEL_NAME
from web_helpers import free_port
from web_helpers import http
from web_helpers import start_server
from keras_transformer.serving import command
from keras_transformer.serving import config as config_lib
from keras_transformer.serving import server as server_lib

SENTENCE = "我们来试试。"


def predict(server, signature, text):
    status, body = http("POST", f"{server.rest_url}/v1/models/{MODEL_NAME}:predict",
                        {"signature_name": signature, "instances": [text]})
    assert status == 200, body
    return body["predictions"][0]


def texts(driver, selector):
    return [element.text for element in driver.find_elements(By.CSS_SELECTOR, selector)]


def heatmap_weights(driver):
    return np.array(driver.execute_script(
        "return [...document.querySelectorAll('#heatmap tbody tr')].map(row =>"
        " [...row.querySelectorAll('td')].map(cell => Number(cell.dataset.weight)));"))


def choose_view(driver, value):
    driver.execute_script(
        "const menu = document.getElementById('attention-view'); menu.value = arguments[0];"
        "menu.dispatchEvent(new Event('change'));", value)


# The server side: no browser needed ------------------------------------------------


def test_packaged_page_and_its_files_are_served_at_root(page_server):
    base = page_server.rest_url
    status, page = http("GET", base + "/")
    assert status == 200 and '<script src="app.js">' in page and 'id="heatmap"' in page
    for name, fragment in (("app.js", "signature_name"), ("style.css", "#heatmap")):
        status, body = http("GET", f"{base}/{name}")
        assert status == 200 and fragment in body, name
    assert http("GET", base + "/config.json") == (200, {"model": MODEL_NAME,
                                                        "models": [MODEL_NAME]})
    # The page's routes shadow neither the API nor its errors.
    status, body = http("GET", f"{base}/v1/models/{MODEL_NAME}")
    assert status == 200 and body["model_version_status"][0]["state"] == "AVAILABLE"
    assert http("GET", base + "/nothing.js")[0] == 404
    assert http("GET", base + "/..%2Fserver.py")[0] == 404


def test_web_page_flag_turns_the_page_off():
    parser = command.add_arguments(argparse.ArgumentParser())
    on = command.options_from_args(parser.parse_args(["--model_base_path=/models/m"]))
    assert on.page_dir == config_lib.WEB_PAGE_DIR
    off = command.options_from_args(
        parser.parse_args(["--model_base_path=/models/m", "--web_page=false"]))
    assert off.web_page is False and off.page_dir is None
    with pytest.raises(config_lib.ConfigError):
        command.options_from_args(parser.parse_args(
            ["--model_base_path=/models/m", "--web_page=false", "--static_dir=/tmp"]))
    options = server_lib.ServerOptions(
        model_config=config_lib.parse_model_config("model_config_list {}"),
        port=0, rest_api_port=0, poll_seconds=0, web_page=False)
    with server_lib.ServerThread(options) as running:
        status, body = http("GET", running.rest_url + "/")
        assert status == 404 and "error" in body
        assert http("GET", running.rest_url + "/app.js")[0] == 404


# In the browser -------------------------------------------------------------------


def test_translation_n_best_and_heatmap_match_the_api(page_server, browser):
    screenshot.open_page(browser, page_server.rest_url + "/")  # Model from config.json.
    assert MODEL_NAME in browser.find_element(By.ID, "model-status").text
    assert screenshot.translate_on_page(browser, SENTENCE) == "done", \
        screenshot.error_text(browser)

    expected = predict(page_server, "attention", SENTENCE)
    n_best = predict(page_server, "translate_n_best", SENTENCE)
    assert browser.find_element(By.ID, "translation").text == expected["translation"].strip()
    assert float(browser.find_element(By.ID, "score").text) == pytest.approx(
        expected["score"], abs=1e-3)
    assert texts(browser, "#n-best .candidate") == [t.strip() for t in n_best["translations"]]

    rows, columns = expected["target_lengths"], expected["source_lengths"]
    assert texts(browser, "#heatmap thead th.source-piece") == \
        expected["source_pieces"][:columns]
    assert texts(browser, "#heatmap tbody th.target-piece") == \
        expected["target_pieces"][:rows]
    assert texts(browser, "#heatmap tbody th.target-piece")[-1] == "</s>"
    cross = np.array(expected["cross_attention"])[:, :, :rows, :columns]  # (N, H, T, S)
    np.testing.assert_allclose(heatmap_weights(browser), cross.mean(axis=(0, 1)), atol=1e-3)

    layers, heads = cross.shape[:2]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#attention-view option")) == \
        1 + layers * (1 + heads)
    choose_view(browser, f"L{layers - 1}H{heads - 1}")
    np.testing.assert_allclose(heatmap_weights(browser), cross[-1, -1], atol=1e-3)
    choose_view(browser, "L0")
    np.testing.assert_allclose(heatmap_weights(browser), cross[0].mean(axis=0), atol=1e-3)


def test_empty_and_too_long_inputs_are_refused_in_words(page_server, browser):
    screenshot.open_page(browser, f"{page_server.rest_url}/?model={MODEL_NAME}")
    for blank in ("", "  \n "):
        assert screenshot.translate_on_page(browser, blank) == "error"
        assert "text box is empty" in screenshot.error_text(browser)
    assert screenshot.translate_on_page(browser, "试" * 1001) == "error"
    assert "too long: 1001 characters" in screenshot.error_text(browser)
    # Longer than the model reads (24 pieces): translated, with a notice saying so.
    assert screenshot.translate_on_page(browser, "这是一个非常长的句子，" * 10) == "done"
    notice = browser.find_element(By.ID, "notice")
    assert notice.is_displayed() and "only its first 24 pieces" in notice.text
    assert screenshot.error_text(browser) == ""
    assert screenshot.translate_on_page(browser, SENTENCE) == "done"
    assert not notice.is_displayed()
    # An error hides the result, which belonged to the text before.
    assert screenshot.translate_on_page(browser, "") == "error"
    assert not browser.find_element(By.ID, "result").is_displayed()


def test_api_errors_are_shown_in_words(page_server, browser):
    screenshot.open_page(browser, page_server.rest_url + "/?model=no_such_model")
    assert "no_such_model" in browser.find_element(By.ID, "model-status").text
    assert screenshot.translate_on_page(browser, SENTENCE) == "error"
    error = screenshot.error_text(browser)
    assert error.startswith("Not found: ") and "no_such_model" in error


def test_unreachable_or_stopped_server_is_shown_in_words(exported_model, page_server, browser):
    dead_api = f"http://127.0.0.1:{free_port()}"
    screenshot.open_page(browser, f"{page_server.rest_url}/?model={MODEL_NAME}&api={dead_api}")
    assert "Could not reach" in browser.find_element(By.ID, "model-status").text
    assert screenshot.translate_on_page(browser, SENTENCE) == "error"
    assert f"Could not reach the translation server at {dead_api}" in \
        screenshot.error_text(browser)

    running = start_server(exported_model)
    try:
        screenshot.open_page(browser, running.rest_url + "/")
        assert "ready" in browser.find_element(By.ID, "model-status").text
    finally:
        running.stop()
    assert screenshot.translate_on_page(browser, SENTENCE) == "error"
    assert "Could not reach the translation server" in screenshot.error_text(browser)


def test_screenshot_command_writes_a_png(page_server, browser, tmp_path):
    output = tmp_path / "page.png"
    assert screenshot.main(["--url", f"{page_server.rest_url}/?model={MODEL_NAME}",
                            "--text", SENTENCE, "-o", str(output), "--attention", "L0H0"]) == 0
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_browser_is_a_skip_reason_that_says_how_to_install(monkeypatch):
    monkeypatch.setattr(screenshot, "CHROMIUM", "/nonexistent/chromium")
    reason = screenshot.browser_missing_reason()
    assert "/nonexistent/chromium not found" in reason and "install_browser.sh" in reason
    with pytest.raises(screenshot.BrowserMissing):
        screenshot.start_chromium()
