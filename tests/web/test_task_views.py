"""The page's language-model and classifier views, in headless Chromium.

The page reads the model's metadata and offers what its signatures serve:
generation through :predict with the `sample` signature, classification through
:classify. What it shows must be what the API returns.
"""

import pytest
from selenium.webdriver.common.by import By

import screenshot
from web_helpers import CLASSIFIER_LABELS
from web_helpers import CLASSIFIER_NAME
from web_helpers import LM_NAME
from web_helpers import http


def api(server, model, method, body):
    status, answer = http("POST", f"{server.rest_url}/v1/models/{model}:{method}", body)
    assert status == 200, answer
    return answer


def set_field(driver, element_id, value):
    driver.execute_script("document.getElementById(arguments[0]).value = arguments[1];",
                          element_id, str(value))


def kind(driver):
    return driver.execute_script("return document.body.dataset.kind")


def test_language_model_view_generates_with_the_chosen_sampling(task_server, browser):
    screenshot.open_page(browser, f"{task_server.rest_url}/?model={LM_NAME}")
    assert kind(browser) == "lm"
    assert browser.find_element(By.ID, "page-title").text == "Generate"
    assert browser.find_element(By.ID, "sampling").is_displayed()
    settings = {"temperature": 1.3, "top-k": 0, "top-p": 1, "seed": 17, "max-new-tokens": 7}
    for element_id, value in settings.items():
        set_field(browser, element_id, value)
    assert screenshot.translate_on_page(browser, "Tom is") == "done", \
        screenshot.error_text(browser)
    expected = api(task_server, LM_NAME, "predict", {"signature_name": "sample", "instances": [
        {"text": "Tom is", "temperature": 1.3, "top_k": 0, "top_p": 1.0, "seed": 17,
         "max_new_tokens": 7}]})["predictions"][0]
    assert browser.find_element(By.ID, "prompt").text == "Tom is"
    shown = browser.execute_script("return document.getElementById('continuation').textContent")
    assert shown == expected
    assert not browser.find_element(By.ID, "result").is_displayed()  # No translator parts.

    set_field(browser, "seed", 18)  # Another seed: the page asks again, with it.
    assert screenshot.translate_on_page(browser, "Tom is") == "done"
    other = api(task_server, LM_NAME, "predict", {"signature_name": "sample", "instances": [
        {"text": "Tom is", "temperature": 1.3, "top_k": 0, "top_p": 1.0, "seed": 18,
         "max_new_tokens": 7}]})["predictions"][0]
    assert browser.execute_script(
        "return document.getElementById('continuation').textContent") == other


@pytest.mark.parametrize("element_id, value, fragment", [
    ("temperature", "-1", "Temperature must be a number of 0 or more"),
    ("top-k", "2.5", "Top-k must be a whole number"),
    ("top-p", "0", "Top-p must be a number above 0"),
    ("max-new-tokens", "", "New tokens must be a whole number from 1 to 1024"),
])
def test_bad_sampling_settings_are_refused_in_words(task_server, browser, element_id, value,
                                                   fragment):
    screenshot.open_page(browser, f"{task_server.rest_url}/?model={LM_NAME}")
    set_field(browser, element_id, value)
    assert screenshot.translate_on_page(browser, "Tom is") == "error"
    assert fragment in screenshot.error_text(browser)


def test_classifier_view_shows_the_label_and_every_class_probability(task_server, browser):
    screenshot.open_page(browser, f"{task_server.rest_url}/?model={CLASSIFIER_NAME}")
    assert kind(browser) == "classify"
    assert browser.find_element(By.ID, "page-title").text == "Classify"
    assert not browser.find_element(By.ID, "sampling").is_displayed()
    text = "Where did you put the keys?"
    assert screenshot.translate_on_page(browser, text) == "done", screenshot.error_text(browser)
    results = api(task_server, CLASSIFIER_NAME, "classify", {
        "signature_name": "classify", "examples": [{"text": text}]})["results"][0]
    expected = sorted(results, key=lambda pair: -pair[1])
    rows = browser.execute_script(
        "return [...document.querySelectorAll('#class-scores tr')].map(row =>"
        " [row.querySelector('th').textContent, Number(row.querySelector('.probability')"
        ".dataset.score)]);")
    assert [label for label, _ in rows] == [label for label, _ in expected]
    assert sorted(label for label, _ in rows) == sorted(CLASSIFIER_LABELS)
    assert [score for _, score in rows] == pytest.approx([s for _, s in expected], abs=1e-6)
    assert browser.find_element(By.ID, "label").text == expected[0][0]
    predicted = api(task_server, CLASSIFIER_NAME, "predict", {"instances": [text]})
    assert predicted["predictions"][0]["label"] == expected[0][0]


def test_translator_view_stays_for_a_model_without_those_signatures(page_server, browser):
    screenshot.open_page(browser, page_server.rest_url + "/")
    assert kind(browser) == "translate"
    assert browser.find_element(By.ID, "page-title").text == "Translate"
    assert not browser.find_element(By.ID, "sampling").is_displayed()
