"""Drives the translation page in headless Chromium: translate a sentence, save a screenshot.

Used for the documentation's picture and by the page's end-to-end tests; kept with the
tests because the server never needs it. Needs Debian's
`chromium` and `chromium-driver` (tests/web/install_browser.sh) and the `selenium`
package; nothing is downloaded at run time.

Example:
    keras-transformer serve --model_name=zh_en --model_base_path=export/zh_en &
    python tests/web/screenshot.py \\
        --url "http://127.0.0.1:8501/?model=zh_en" --text "我们来试试。" -o docs/web-page.png
"""

import argparse
import os
import shutil
import sys
import tempfile

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Headless, and quiet: no sandbox (root in containers), no GPU, no calls home.
CHROMIUM_ARGUMENTS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars",
)
STATES_DONE = ("done", "error")


class BrowserMissing(RuntimeError):
    """Chromium, chromedriver or selenium is not installed."""


def browser_missing_reason(chromium=None, chromedriver=None):
    """Why a headless Chromium cannot be started here, or None when it can."""
    for path in (chromium or CHROMIUM, chromedriver or CHROMEDRIVER):
        if not os.path.exists(path):
            return (f"{path} not found: install Debian's chromium and chromium-driver "
                    "(bash tests/web/install_browser.sh)")
    return None


def start_chromium(width=1100, height=900, chromium=None, chromedriver=None):
    """Starts a headless Chromium with a fresh profile, driven by the system chromedriver.

    Returns:
        (driver, profile_dir): quit the driver, then remove the folder.

    Raises:
        BrowserMissing: when chromium, chromedriver or selenium is absent.
    """
    chromium, chromedriver = chromium or CHROMIUM, chromedriver or CHROMEDRIVER
    reason = browser_missing_reason(chromium, chromedriver)
    if reason:
        raise BrowserMissing(reason)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as error:
        raise BrowserMissing(f"selenium is not installed ({error})") from None

    profile = tempfile.mkdtemp(prefix="kt-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in CHROMIUM_ARGUMENTS:
        options.add_argument(argument)
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={profile}")
    try:
        driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    except BaseException:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    driver.set_page_load_timeout(60)
    return driver, profile


def _wait(driver, condition, timeout, what):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: condition(d))
    except TimeoutException:
        raise TimeoutError(f"The page did not {what} within {timeout} s") from None


def open_page(driver, url, timeout=60):
    """Loads the page and waits until it has read its settings and checked the model."""
    driver.get(url)
    if not driver.execute_script("return !!document.getElementById('translate-form')"):
        title = driver.execute_script("return document.title") or "no title"
        raise ValueError(f"{url} is not the translation page ({title}): is the server running "
                         "and serving the page (not --web_page=false)?")
    _wait(driver, lambda d: d.execute_script("return document.body.dataset.ready === 'true'"),
          timeout, "finish loading")


def body_state(driver):
    """body[data-state]: "idle", "loading", "done" or "error"."""
    return driver.execute_script("return document.body.dataset.state")


def set_text(driver, text):
    """Puts `text` in the text box as typing would (any characters, any length)."""
    driver.execute_script(
        "const box = document.getElementById('source'); box.value = arguments[0];"
        "box.dispatchEvent(new Event('input', {bubbles: true}));", text)


def translate_on_page(driver, text, timeout=120):
    """Types `text`, presses Translate and waits for the outcome.

    Returns:
        "done", or "error" (the words are in `error_text(driver)`).
    """
    from selenium.webdriver.common.by import By

    set_text(driver, text)
    # Marks the previous outcome so that only a new one ends the wait.
    driver.execute_script("document.body.dataset.state = 'idle'")
    driver.find_element(By.ID, "translate").click()
    return _wait(driver, lambda d: body_state(d) in STATES_DONE and body_state(d),
                 timeout, "show a translation or an error")


def error_text(driver):
    """The words shown in the page's error box ("" when hidden)."""
    from selenium.webdriver.common.by import By

    element = driver.find_element(By.ID, "error")
    return element.text if element.is_displayed() else ""


def save_full_page(driver, output, width=1100):
    """Resizes the window to show the whole page and saves it as a PNG."""
    height = 600
    for _ in range(3):  # The window has some rows the page cannot use; measure, then fix.
        driver.set_window_size(width, height)
        page, view = driver.execute_script(
            "return [document.documentElement.scrollHeight, window.innerHeight]")
        if page <= view:
            break
        height = min(height + page - view, 8000)
    folder = os.path.dirname(os.path.abspath(output))
    os.makedirs(folder, exist_ok=True)
    if not driver.save_screenshot(output):
        raise OSError(f"Could not write {output}")
    return output


def screenshot(url, text, output, attention_view="avg", width=1100, timeout=120):
    """Translates `text` on the page at `url` and saves a screenshot to `output`.

    Args:
        url: the page, e.g. "http://127.0.0.1:8501/?model=zh_en".
        text: the sentence to translate.
        output: the PNG to write.
        attention_view: heatmap menu value: "avg", "L0" (layer 1's average), "L0H1", ...
        width: window width in pixels.
        timeout: seconds to wait for the page and the translation.

    Returns:
        (state, error): "done" and "", or "error" and the page's words.
    """
    driver, profile = start_chromium(width=width)
    try:
        open_page(driver, url, timeout)
        state = translate_on_page(driver, text, timeout)
        if state == "done" and attention_view != "avg":
            found = driver.execute_script(
                "const menu = document.getElementById('attention-view');"
                "if (![...menu.options].some(o => o.value === arguments[0])) return false;"
                "menu.value = arguments[0]; menu.dispatchEvent(new Event('change'));"
                "return true;", attention_view)
            if not found:
                raise ValueError(f"No attention view {attention_view!r} in the page's menu")
        save_full_page(driver, output, width)
        return state, error_text(driver)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python tests/web/screenshot.py",
        description="Translate a sentence on the web page in headless Chromium; save a PNG.")
    parser.add_argument("--url", default="http://127.0.0.1:8501/",
                        help="The page, with ?model=NAME (and &api=URL) when needed.")
    parser.add_argument("--text", default="我们来试试。", help="The sentence to translate.")
    parser.add_argument("-o", "--output", default="docs/web-page.png", help="PNG to write.")
    parser.add_argument("--attention", default="avg",
                        help='Heatmap view: "avg", "L0" (layer 1 average), '
                             '"L0H1" (layer 1, head 2).')
    parser.add_argument("--width", type=int, default=1100, help="Window width in pixels.")
    parser.add_argument("--timeout", type=float, default=120, help="Seconds to wait.")
    args = parser.parse_args(argv)
    try:
        state, error = screenshot(args.url, args.text, args.output, args.attention,
                                  args.width, args.timeout)
    except BrowserMissing as missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    except (TimeoutError, ValueError, OSError) as failure:
        print(f"error: {failure}", file=sys.stderr)
        return 1
    except Exception as failure:  # A WebDriver error: its first line says what happened.
        first_line = (str(failure).strip().splitlines() or [""])[0]
        print(f"error: {type(failure).__name__}: {first_line}", file=sys.stderr)
        return 1
    if state != "done":
        print(f"error: the page showed an error (screenshot saved to {args.output}): {error}",
              file=sys.stderr)
        return 1
    print(args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
