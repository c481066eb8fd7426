"""The playground in a real headless Chromium against a real server: it loads cleanly, replies
stream in as rendered Markdown, stop cuts a reply short, picking an unloaded model loads it,
raw completions show logprobs on hover, and conversations survive export and import."""

import json
import re
import os
import tempfile
import time

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from conftest import (
    CHAT_MODEL, DESKTOP, PHONE, SECOND_MODEL, console_errors, download_to, open_page, screenshot, set_viewport,
    throttle, wait, wait_for_polls, wait_for_scrapes,
)


def last_reply(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#messages .message.assistant")[-1]


def reply_part(driver, part):
    """The text of the last reply's `.body` or `.meta`, read in one step: the page redraws the
    reply as tokens arrive, so element handles go stale."""
    return driver.execute_script(
        "const r = [...document.querySelectorAll('#messages .message.assistant')].pop();"
        "const e = r && r.querySelector(arguments[0]); return e ? e.innerText : '';", f".{part}")


def send(driver, text):
    box = driver.find_element(By.ID, "prompt")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def set_param(driver, name, value):
    field = driver.find_element(By.ID, f"p-{name}")
    field.clear()
    field.send_keys(str(value))


def test_page_loads_without_console_errors_and_lists_models(server, browser):
    open_page(browser, server.url)
    options = [o.text for o in Select(browser.find_element(By.ID, "model")).options]
    assert any(o.startswith(f"{CHAT_MODEL} (loaded)") for o in options), options
    assert any(o.startswith(f"{SECOND_MODEL} (unloaded)") for o in options), options
    browser.find_element(By.ID, "nav-dashboard").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#pool tbody tr"))
    wait_for_scrapes(browser, 3)
    wait_for_polls(browser, 2)
    assert console_errors(browser) == []


def test_chat_reply_streams_into_the_page_with_speed_shown(server, browser):
    open_page(browser, server.url)
    set_param(browser, "max_tokens", 120)
    set_param(browser, "seed", 7)
    throttle(browser, 6000)
    send(browser, "Tell me of the **beginning**.")
    lengths = set()

    def finished(d):
        lengths.add(len(reply_part(d, "body")))
        return d.find_element(By.ID, "send").is_enabled() and "tok/s" in reply_part(d, "meta")

    wait(browser, finished, timeout=60, message="the reply did not finish")
    # The text grew in several steps: tokens were shown as they arrived.
    assert len([n for n in lengths if n > 0]) >= 3, lengths
    meta = reply_part(browser, "meta")
    assert re.search(r"TTFT \d+ ms · [\d.]+ tok/s · \d+ tokens · prompt \d+ · finish: (stop|length)", meta), meta
    # The user's message is shown verbatim, the conversation is titled by it and kept.
    assert browser.find_elements(By.CSS_SELECTOR, "#messages .message.user")[-1].text.endswith("Tell me of the **beginning**.")
    stored = json.loads(browser.execute_script("return localStorage.getItem('sluice.conversations')"))
    assert stored[0]["title"] == "Tell me of the **beginning**."
    assert [m["role"] for m in stored[0]["messages"]] == ["user", "assistant"]
    screenshot(browser, "playground-desktop")
    set_viewport(browser, PHONE)
    open_page(browser, server.url)  # the stored conversation comes back after a reload
    wait(browser, lambda d: "tok/s" in reply_part(d, "meta"))
    screenshot(browser, "playground-phone")
    set_viewport(browser, DESKTOP)
    assert console_errors(browser) == []


def test_stop_cuts_the_reply_short_and_frees_the_engine(server, browser):
    open_page(browser, server.url)
    set_param(browser, "max_tokens", 400)
    throttle(browser, 3000)
    send(browser, "Go on.")
    wait(browser, lambda d: len(reply_part(d, "body")) > 10, timeout=60)
    browser.find_element(By.ID, "stop").click()
    wait(browser, lambda d: "stopped" in reply_part(d, "meta"))
    text = reply_part(browser, "body")
    assert browser.find_element(By.ID, "send").is_enabled()
    assert not browser.find_element(By.ID, "stop").is_enabled()
    # The server saw the closed stream and freed the sequence long before its 400 tokens.
    deadline = time.time() + 20
    while True:
        _, metrics = server.get("/metrics")
        running = [l for l in metrics.splitlines() if l.startswith("vllm:num_requests_running{") and CHAT_MODEL in l]
        if running and running[0].endswith(" 0"):
            break
        assert time.time() < deadline, running
        time.sleep(0.1)
    # Nothing arrived after the stop: the reply is what it was when Stop was pressed.
    assert reply_part(browser, "body") == text
    stored = json.loads(browser.execute_script("return localStorage.getItem('sluice.conversations')"))
    assert stored[0]["messages"][-1]["stats"]["stopped"] is True
    assert console_errors(browser) == []


def test_regenerate_replaces_the_reply_and_edit_branches(server, browser):
    open_page(browser, server.url)
    set_param(browser, "max_tokens", 8)
    send(browser, "First question")
    wait(browser, lambda d: d.find_element(By.ID, "regenerate").is_enabled(), timeout=60)
    browser.find_element(By.ID, "regenerate").click()
    wait(browser, lambda d: d.find_element(By.ID, "regenerate").is_enabled(), timeout=60)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#messages .message.assistant")) == 1
    before = len(browser.find_elements(By.CSS_SELECTOR, "#conversation-list li"))
    browser.find_element(By.CSS_SELECTOR, "#messages .message.user button[aria-label='Edit and branch']").click()
    area = browser.find_element(By.CSS_SELECTOR, "#messages .message.user textarea")
    area.clear()
    area.send_keys("Second question")
    browser.find_element(By.XPATH, "//button[text()='Save as branch and send']").click()
    wait(browser, lambda d: d.find_element(By.ID, "regenerate").is_enabled(), timeout=60)
    titles = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#conversation-list li")]
    assert len(titles) == before + 1
    assert titles[0].startswith("First question (branch)")
    assert browser.find_element(By.CSS_SELECTOR, "#messages .message.user").text.endswith("Second question")


def test_picking_an_unloaded_model_loads_it_with_progress(server, browser):
    if server.model_status(SECOND_MODEL) == "loaded":
        assert server.post(f"/admin/models/{SECOND_MODEL}/unload") == 200
    open_page(browser, server.url)
    Select(browser.find_element(By.ID, "model")).select_by_value(SECOND_MODEL)
    wait(browser, lambda d: not d.find_element(By.ID, "load-progress").get_attribute("hidden"), timeout=10)
    wait(browser, lambda d: "loaded in" in d.find_element(By.ID, "load-progress").text, timeout=60)
    assert server.model_status(SECOND_MODEL) == "loaded"
    wait(browser, lambda d: f"{SECOND_MODEL} (loaded)" in d.find_element(By.ID, "model").text)
    assert "loaded" in browser.find_element(By.ID, "model-status").text
    assert console_errors(browser) == []


def test_raw_completion_shows_logprobs_on_hover(server, browser):
    open_page(browser, server.url)
    Select(browser.find_element(By.ID, "model")).select_by_value(CHAT_MODEL)
    set_param(browser, "max_tokens", 12)
    set_param(browser, "seed", 3)
    browser.find_element(By.ID, "mode-raw").click()
    browser.find_element(By.ID, "raw-run").click()
    wait(browser, lambda d: "finish:" in d.find_element(By.ID, "raw-stats").text, timeout=60)
    tokens = browser.find_elements(By.CSS_SELECTOR, "#raw-output .tok")
    stats = browser.find_element(By.ID, "raw-stats").text
    # Every token the server sent is shown (the model may end its text before max_tokens).
    assert stats.startswith(f"{len(tokens)} tokens"), stats
    assert len(tokens) == 12 if "finish: length" in stats else 4 <= len(tokens) <= 12, stats
    ActionChains(browser).move_to_element(tokens[3]).perform()
    tip = browser.find_element(By.ID, "token-tip")
    wait(browser, lambda d: tip.is_displayed())
    assert "logprob" in tip.text
    assert len(tip.find_elements(By.CSS_SELECTOR, "tr")) == 5  # the top 5 alternatives
    # The keyboard reaches the same information.
    browser.find_element(By.ID, "raw-output").send_keys(Keys.END)
    assert browser.switch_to.active_element == tokens[-1]
    assert console_errors(browser) == []


def test_conversations_export_and_import_round_trip(server, browser):
    conv = {"id": "cimported", "title": "Imported chat", "created": 1, "updated": 2, "model": CHAT_MODEL,
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": "<think>greet them back</think>**hello**"}]}
    open_page(browser, server.url)
    browser.execute_script("localStorage.setItem('sluice.conversations', JSON.stringify([arguments[0]]))", conv)
    open_page(browser, server.url)
    with tempfile.TemporaryDirectory() as folder:
        download_to(browser, folder)
        browser.find_element(By.ID, "export-chats").click()

        def exported(_):
            # Chromium may show the file before its bytes are written: wait for whole JSON.
            for name in (f for f in os.listdir(folder) if f.endswith(".json")):
                path = os.path.join(folder, name)
                try:
                    with open(path) as f:
                        json.load(f)
                    return path
                except (OSError, ValueError):
                    return None
            return None

        path = wait(browser, exported, message="Export wrote no file")
        with open(path) as f:
            data = json.load(f)
        assert data["format"] == "sluice.conversations.v1"
        assert [c["id"] for c in data["conversations"]] == ["cimported"]
        # A fresh browser profile: nothing stored; importing the file brings the chat back.
        browser.execute_script("localStorage.removeItem('sluice.conversations')")
        open_page(browser, server.url)
        assert not browser.find_elements(By.XPATH, "//button[@class='open' and text()='Imported chat']")
        browser.find_element(By.ID, "import-chats").send_keys(path)
        wait(browser, lambda d: "Imported 1 conversation" in d.find_element(By.ID, "model-status").text)
    browser.find_element(By.XPATH, "//button[@class='open' and text()='Imported chat']").click()
    reply = last_reply(browser)
    assert reply.find_element(By.CSS_SELECTOR, ".body > p > strong").text == "hello"
    # The reasoning is folded away, and opens on demand.
    reasoning = reply.find_element(By.CSS_SELECTOR, "details.reasoning")
    assert reasoning.get_attribute("open") is None
    assert not reasoning.find_element(By.CSS_SELECTOR, "p").is_displayed()
    reasoning.find_element(By.CSS_SELECTOR, "summary").click()
    assert reasoning.find_element(By.CSS_SELECTOR, "p").text == "greet them back"
    stored = json.loads(browser.execute_script("return localStorage.getItem('sluice.conversations')"))
    assert any(c["id"] == "cimported" for c in stored)
    assert console_errors(browser) == []


def test_dark_theme_is_chosen_and_remembered(server, browser):
    open_page(browser, server.url)
    Select(browser.find_element(By.ID, "theme")).select_by_value("dark")
    background = "return getComputedStyle(document.body).backgroundColor"
    assert browser.execute_script(background) == "rgb(15, 20, 27)"
    open_page(browser, server.url, "#/dashboard")
    assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
    assert browser.execute_script(background) == "rgb(15, 20, 27)"
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#pool tbody tr"))
    wait(browser, lambda d: int(d.find_element(By.ID, "chart-tokens").get_attribute("data-points")) >= 2)
    screenshot(browser, "dashboard-dark")
    Select(browser.find_element(By.ID, "theme")).select_by_value("light")
    assert browser.execute_script(background) == "rgb(247, 248, 250)"
