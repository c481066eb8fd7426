"""The dashboard in a real headless Chromium against a real server: the pool table drives the
admin API (a refused unload shows the 409), unloading changes /v1/models, and the charts fill
from /metrics while a load runs."""

import json
import threading
import time
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import (
    CHAT_MODEL, DESKTOP, PHONE, SECOND_MODEL, console_errors, open_page, screenshot, set_viewport, wait,
)


def row(driver, model):
    return driver.find_element(By.CSS_SELECTOR, f"#pool tbody tr[data-model='{model}']")


def row_status(driver, model):
    return driver.execute_script(
        "const r = document.querySelector(`#pool tbody tr[data-model='${arguments[0]}']`);"
        "return r ? r.dataset.status : null;", model)


def chart_points(driver, chart):
    """Points drawn in `chart`; charts out of view are not drawn, so it is scrolled into view."""
    el = driver.find_element(By.ID, chart)
    driver.execute_script("arguments[0].scrollIntoView({block: 'nearest'})", el)
    return int(el.get_attribute("data-points"))


def click_action(driver, model, label):
    # The table is redrawn every two seconds; find the button right before clicking.
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"button[aria-label='{label} {model}']"))
    driver.execute_script(
        "document.querySelector(`button[aria-label='${arguments[0]}']`).click()", f"{label} {model}")


def test_charts_receive_data_while_a_load_runs(server, browser):
    if server.model_status(SECOND_MODEL) == "loaded":
        assert server.post(f"/admin/models/{SECOND_MODEL}/unload") == 200
    open_page(browser, server.url, "#/dashboard")
    wait(browser, lambda d: row_status(d, SECOND_MODEL) == "unloaded")
    wait(browser, lambda d: chart_points(d, "chart-memory") >= 2, message="no memory points")
    before = chart_points(browser, "chart-memory")
    click_action(browser, SECOND_MODEL, "Load")
    wait(browser, lambda d: row_status(d, SECOND_MODEL) == "loaded", timeout=60)
    # Scrapes went on through the load, and the newly loaded model has its own series.
    wait(browser, lambda d: chart_points(d, "chart-memory") > before + 2)
    legend = browser.find_element(By.CSS_SELECTOR, "#chart-tokens .legend").text
    wait(browser, lambda d: SECOND_MODEL in d.find_element(By.CSS_SELECTOR, "#chart-tokens .legend").text)
    assert CHAT_MODEL in legend
    assert "loaded" in browser.find_element(By.ID, "pool-message").text
    memory = browser.find_element(By.ID, "memory-text").text
    assert "used" in memory and "of" in memory, memory
    assert console_errors(browser) == []


def test_decoding_shows_in_the_token_rate_chart(server, browser):
    open_page(browser, server.url, "#/dashboard")
    wait(browser, lambda d: chart_points(d, "chart-tokens") >= 2)
    # A few seconds of traffic at two streams, so the charts have a shape in the screenshot.
    body = json.dumps({"model": CHAT_MODEL, "prompt": "In the beginning", "max_tokens": 400,
                       "ignore_eos": True}).encode()

    def complete():
        req = urllib.request.Request(server.url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as res:
            assert res.status == 200

    deadline = time.time() + 5
    while time.time() < deadline:
        threads = [threading.Thread(target=complete) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # Some scrape after the request saw the generation counter move.
    wait(browser, lambda d: d.execute_script(
        "return [...document.querySelectorAll('#chart-tokens .legend span')]"
        ".some(s => s.textContent.startsWith(arguments[0]))", CHAT_MODEL))
    wait(browser, lambda d: browser.execute_script(
        "return document.querySelector('#chart-ttft .legend').textContent.includes('ms')"), timeout=10)
    Select(browser.find_element(By.ID, "chart-window")).select_by_value("60")
    set_viewport(browser, (1280, 1240))  # tall enough to show every chart
    time.sleep(1.2)
    screenshot(browser, "dashboard-desktop")
    set_viewport(browser, PHONE)
    open_page(browser, server.url, "#/dashboard")
    wait(browser, lambda d: chart_points(d, "chart-tokens") >= 2)
    browser.execute_script("document.querySelector('.dashboard').scrollTop = 0")
    screenshot(browser, "dashboard-phone")
    set_viewport(browser, DESKTOP)


def test_unload_from_the_dashboard_changes_v1_models(server, browser):
    if server.model_status(SECOND_MODEL) != "loaded":
        assert server.post(f"/admin/models/{SECOND_MODEL}/load") == 200
    open_page(browser, server.url, "#/dashboard")
    wait(browser, lambda d: row_status(d, SECOND_MODEL) == "loaded")
    click_action(browser, SECOND_MODEL, "Unload")
    wait(browser, lambda d: row_status(d, SECOND_MODEL) == "unloaded", timeout=30)
    assert server.model_status(SECOND_MODEL) == "unloaded"
    assert console_errors(browser) == []


def test_refused_unload_shows_the_409(server, browser):
    open_page(browser, server.url, "#/dashboard")
    wait(browser, lambda d: row_status(d, CHAT_MODEL) == "loaded")
    assert row(browser, CHAT_MODEL).find_elements(By.XPATH, ".//td[text()='pinned']")
    click_action(browser, CHAT_MODEL, "Unload")
    wait(browser, lambda d: "409" in d.find_element(By.ID, "pool-message").text)
    assert "pinned" in browser.find_element(By.ID, "pool-message").text
    assert server.model_status(CHAT_MODEL) == "loaded"
    # The refused request logged a 409 in the console; nothing else went wrong.
    others = [e for e in console_errors(browser) if "409" not in e["message"]]
    assert others == []
