"""The dashboard in a real headless Chromium against a real server: the pool table drives the
admin API (a refused unload shows the 409), unloading changes /v1/models, and the charts fill
from /metrics while a load runs."""

import json
import re
import threading
import time
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import (
    CHAT_MODEL, DESKTOP, PHONE, SECOND_MODEL, console_errors, open_page, pool_row, screenshot, set_viewport, wait,
    wait_for_polls, wait_for_scrapes,
)

# Long enough (several KV blocks) that repeating it hits the prefix cache.
LONG_PROMPT = " ".join(["In the beginning God created the heaven and the earth."] * 8)
CHARTS = ["chart-tokens", "chart-requests", "chart-kv", "chart-ttft", "chart-itl", "chart-preempt",
          "chart-prefix", "chart-spec", "chart-memory"]


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


def legend(driver, chart):
    return driver.execute_script("return document.querySelector(`#${arguments[0]} .legend`).textContent", chart)


def test_decoding_shows_in_every_chart_per_model(server, browser):
    open_page(browser, server.url, "#/dashboard")
    wait(browser, lambda d: chart_points(d, "chart-tokens") >= 2)
    # A few seconds of traffic at two streams, the same long prompt each time, so the charts
    # have a shape (in the screenshot too) and the prefix cache has something to hit.
    body = json.dumps({"model": CHAT_MODEL, "prompt": LONG_PROMPT, "max_tokens": 400,
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
    # The scrapes after the traffic saw every counter and histogram move. Only charts in view
    # are drawn: the viewport is made tall enough to show them all.
    set_viewport(browser, (1280, 1240))
    wait_for_scrapes(browser, 2)
    tokens = legend(browser, "chart-tokens")
    assert CHAT_MODEL in tokens
    for chart in ["chart-ttft", "chart-itl"]:
        assert f"{CHAT_MODEL} p50: " in legend(browser, chart)
        assert re.search(rf"{CHAT_MODEL} p95: [\d.]+ ms", legend(browser, chart)), legend(browser, chart)
    assert re.search(rf"{CHAT_MODEL} running: \d+", legend(browser, "chart-requests"))
    assert re.search(rf"{CHAT_MODEL} waiting: \d+", legend(browser, "chart-requests"))
    assert re.search(rf"{CHAT_MODEL}: [\d.]+%", legend(browser, "chart-kv"))
    assert re.search(rf"{CHAT_MODEL}: \d", legend(browser, "chart-preempt"))
    hit = re.search(rf"{CHAT_MODEL}: ([\d.]+)%", legend(browser, "chart-prefix"))
    assert hit and float(hit.group(1)) > 0, legend(browser, "chart-prefix")
    # The server runs with the disk tier: its share of the hits and its directory are shown.
    assert re.search(rf"{CHAT_MODEL} from disk: [\d.]+%", legend(browser, "chart-prefix")), legend(browser, "chart-prefix")
    # The server speculates: the share of draft tokens kept is charted and totalled.
    assert re.search(rf"{CHAT_MODEL}: [\d.]+%", legend(browser, "chart-spec")), legend(browser, "chart-spec")
    stats = browser.find_element(By.ID, "now-stats").text
    assert "Draft tokens accepted" in stats, stats
    assert "Disk cache" in stats and "Disk blocks read / written" in stats, stats
    assert "used: " in legend(browser, "chart-memory") and "budget: " in legend(browser, "chart-memory")
    for chart in CHARTS:
        assert chart_points(browser, chart) >= 2, chart
    Select(browser.find_element(By.ID, "chart-window")).select_by_value("60")
    browser.execute_script("document.activeElement.blur()")
    wait_for_scrapes(browser, 1)
    screenshot(browser, "dashboard-desktop")
    set_viewport(browser, PHONE)
    open_page(browser, server.url, "#/dashboard")
    wait(browser, lambda d: chart_points(d, "chart-tokens") >= 2)
    browser.execute_script("document.querySelector('.dashboard').scrollTop = 0")
    screenshot(browser, "dashboard-phone")
    set_viewport(browser, DESKTOP)
    assert console_errors(browser) == []


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
    assert pool_row(browser, CHAT_MODEL)["pinned"] == "true"
    assert browser.execute_script(
        "return document.querySelector(`#pool tr[data-model='${arguments[0]}'] td:nth-child(4)`).textContent",
        CHAT_MODEL) == "pinned"
    click_action(browser, CHAT_MODEL, "Unload")
    wait(browser, lambda d: "409" in d.find_element(By.ID, "pool-message").text)
    assert "pinned" in browser.find_element(By.ID, "pool-message").text
    assert server.model_status(CHAT_MODEL) == "loaded"
    # The refused request logged a 409 in the console; nothing else went wrong.
    others = [e for e in console_errors(browser) if "409" not in e["message"]]
    assert others == []


def test_pin_and_unpin_from_the_dashboard(server, browser):
    if server.model_status(SECOND_MODEL) != "loaded":
        assert server.post(f"/admin/models/{SECOND_MODEL}/load") == 200
    open_page(browser, server.url, "#/dashboard")
    try:
        wait(browser, lambda d: row_status(d, SECOND_MODEL) == "loaded")
        click_action(browser, SECOND_MODEL, "Pin")
        wait(browser, lambda d: (pool_row(d, SECOND_MODEL) or {}).get("pinned") == "true")
        assert f"{SECOND_MODEL} pinned" in browser.find_element(By.ID, "pool-message").text
        _, body = server.get("/admin/models")
        assert next(m for m in json.loads(body)["data"] if m["id"] == SECOND_MODEL)["pinned"] is True
        # Pinned, it refuses to unload.
        click_action(browser, SECOND_MODEL, "Unload")
        wait(browser, lambda d: "409" in d.find_element(By.ID, "pool-message").text)
        assert "pinned" in browser.find_element(By.ID, "pool-message").text
        assert server.model_status(SECOND_MODEL) == "loaded"
        click_action(browser, SECOND_MODEL, "Unpin")
        wait(browser, lambda d: (pool_row(d, SECOND_MODEL) or {}).get("pinned") == "false")
        _, body = server.get("/admin/models")
        assert next(m for m in json.loads(body)["data"] if m["id"] == SECOND_MODEL)["pinned"] is False
    finally:
        server.post(f"/admin/models/{SECOND_MODEL}/unpin")
    others = [e for e in console_errors(browser) if "409" not in e["message"]]
    assert others == []


def test_unloading_a_busy_model_shows_the_409_busy(server, browser):
    """Unload clicked while generations are in flight is refused with the 409 "busy", shown as
    such. The bundled model is unpinned for the test (a pinned model's 409 says "pinned" first)."""
    assert server.post(f"/admin/models/{CHAT_MODEL}/unpin") == 200
    open_page(browser, server.url, "#/dashboard")
    body = json.dumps({"model": CHAT_MODEL, "prompt": "In the beginning", "max_tokens": 480,
                       "ignore_eos": True, "stream": True}).encode()

    def generation():
        req = urllib.request.Request(server.url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        return urllib.request.urlopen(req, timeout=60)

    try:
        # Four streams of 480 tokens take far longer than the click's one request, so the
        # first try is refused; should the machine stall in between and let them finish,
        # the unload goes through and the test reloads and tries again.
        for _ in range(5):
            if server.model_status(CHAT_MODEL) != "loaded":
                assert server.post(f"/admin/models/{CHAT_MODEL}/load") == 200
            wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f"button[aria-label='Unload {CHAT_MODEL}']"))
            browser.execute_script("document.getElementById('pool-message').textContent = ''")
            streams = [generation() for _ in range(4)]
            try:
                for res in streams:
                    assert res.readline().startswith(b"data: ")
                browser.execute_script(
                    "document.querySelector(`button[aria-label='${arguments[0]}']`).click()", f"Unload {CHAT_MODEL}")
                wait(browser, lambda d: d.find_element(By.ID, "pool-message").text.startswith(("Refused", CHAT_MODEL)))
            finally:
                for res in streams:
                    res.close()
            message = browser.find_element(By.ID, "pool-message").text
            if message.startswith("Refused"):
                break
        assert message.startswith("Refused (409, model_state_conflict): "), message
        assert "in flight" in message, message
        assert server.model_status(CHAT_MODEL) == "loaded"
    finally:
        assert server.post(f"/admin/models/{CHAT_MODEL}/pin") == 200
        if server.model_status(CHAT_MODEL) != "loaded":
            assert server.post(f"/admin/models/{CHAT_MODEL}/load") == 200
    others = [e for e in console_errors(browser) if "409" not in e["message"]]
    assert others == []
