"""Fixtures for the web app's browser tests: a real `sluice serve` on fixture models and a real
headless Chromium (Debian's `chromium` with `chromedriver`, driven by Selenium).

The served pool holds the bundled `sluice-kjv-mini` (preloaded and pinned, so unloading it is
refused with 409) and the tiny `llama` fixture (not loaded at start). Screenshots go to
$SLUICE_SCREENSHOTS (default target/ui-screenshots).
"""

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
CHAT_MODEL = "sluice-kjv-mini"
SECOND_MODEL = "llama"
SCREENSHOTS = Path(os.environ.get("SLUICE_SCREENSHOTS", ROOT / "target" / "ui-screenshots"))
DESKTOP = (1280, 860)
PHONE = (390, 844)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `sluice serve`; stopped by the fixture that made it."""

    def __init__(self, *extra: str):
        binary = os.environ.get("SLUICE_BIN", str(ROOT / "target" / "debug" / "sluice"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = None
        args = [
            binary, "serve",
            "--model", str(ROOT / "models" / CHAT_MODEL),
            "--model", str(ROOT / "fixtures" / "models" / SECOND_MODEL),
            "--preload", CHAT_MODEL, "--pin", CHAT_MODEL,
            "--kv-cache-memory", "0.05",
            "--host", "127.0.0.1", "--port", str(self.port), *extra,
        ]
        if "--api-key" in extra:
            self.key = extra[extra.index("--api-key") + 1]
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        listening = threading.Event()
        self.log = []

        def drain():
            for line in self.proc.stderr:
                self.log.append(line)
                # It listens before its preload is done; tests start after.
                if "started: every --preload model is loaded" in line:
                    listening.set()

        threading.Thread(target=drain, daemon=True).start()
        deadline = time.time() + 120
        while not listening.is_set():
            if self.proc.poll() is not None or time.time() > deadline:
                self.proc.kill()
                pytest.fail("sluice serve did not start:\n" + "".join(self.log))
            time.sleep(0.05)

    def get(self, path: str):
        """(status, body) of a GET with the server's key, if any."""
        req = urllib.request.Request(self.url + path)
        if self.key:
            req.add_header("Authorization", f"Bearer {self.key}")
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                return res.status, res.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def model_status(self, model: str) -> str:
        _, body = self.get("/v1/models")
        return next(m["status"] for m in json.loads(body)["data"] if m["id"] == model)

    def post(self, path: str):
        # The admin routes take JSON only (urllib's default type would be a form's).
        req = urllib.request.Request(self.url + path, method="POST", data=b"{}",
                                     headers={"Content-Type": "application/json"})
        if self.key:
            req.add_header("Authorization", f"Bearer {self.key}")
        try:
            with urllib.request.urlopen(req, timeout=60) as res:
                return res.status
        except urllib.error.HTTPError as e:
            return e.code

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # With the prefix cache's disk tier and speculative decoding, as a long-running deployment
    # would have them.
    s = Server("--kv-disk-cache", str(tmp_path_factory.mktemp("kv-disk")), "--speculative", "ngram")
    yield s
    s.stop()


def chromium_paths():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.fail("chromium and chromedriver are needed (./scripts/test installs Debian's packages)")
    return browser, driver


def make_driver(size=DESKTOP, network_log=False, extra_args=()):
    browser, driver_path = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--disable-extensions", "--no-first-run", f"--window-size={size[0]},{size[1]}",
                *extra_args):
        options.add_argument(arg)
    prefs = {"browser": "ALL"}
    if network_log:
        prefs["performance"] = "ALL"  # DevTools events: what the page really sent
    options.set_capability("goog:loggingPrefs", prefs)
    # Selenium Manager would try the network; the system chromedriver is given explicitly.
    return webdriver.Chrome(options=options, service=Service(executable_path=driver_path))


@pytest.fixture
def browser():
    driver = make_driver()
    yield driver
    driver.quit()


@pytest.fixture
def logged_browser():
    """A browser that records its network traffic (read with `sent_bodies`)."""
    driver = make_driver(network_log=True)
    yield driver
    driver.quit()


def sent_bodies(driver, path: str):
    """The JSON bodies of the POSTs the page sent to `path` since the last call, in order,
    read from Chromium's DevTools network events."""
    bodies = []
    for entry in driver.get_log("performance"):
        event = json.loads(entry["message"])["message"]
        if event.get("method") != "Network.requestWillBeSent":
            continue
        req = event["params"]["request"]
        if req["method"] == "POST" and req["url"].split("?")[0].endswith(path) and "postData" in req:
            bodies.append(json.loads(req["postData"]))
    return bodies


def counter(driver, element_id: str, name: str) -> int:
    """A counter the page keeps in `data-<name>` (scrapes and pool polls drawn so far)."""
    return int(driver.execute_script(
        "const e = document.getElementById(arguments[0]); return (e && e.dataset[arguments[1]]) || 0;",
        element_id, name))


def wait_for_scrapes(driver, more: int = 1, timeout=30):
    """Waits until the dashboard has drawn `more` further /metrics scrapes."""
    start = counter(driver, "scrape-status", "scrapes")
    wait(driver, lambda d: counter(d, "scrape-status", "scrapes") >= start + more, timeout,
         f"no {more} more scrapes")


def wait_for_polls(driver, more: int = 1, timeout=30):
    """Waits until the dashboard has drawn `more` further /admin/models polls."""
    start = counter(driver, "pool", "polls")
    wait(driver, lambda d: counter(d, "pool", "polls") >= start + more, timeout, f"no {more} more pool polls")


def pool_row(driver, model: str):
    """The pool table row of `model` as its data attributes ({model, status, pinned}), read in
    one step (the table is redrawn while we look), or None."""
    return driver.execute_script(
        "const r = [...document.querySelectorAll('#pool tbody tr')].find(r => r.dataset.model === arguments[0]);"
        "return r ? {...r.dataset} : null;", model)


def download_to(driver, folder: str):
    """Makes the page's downloads land in `folder`."""
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": folder})


def no_horizontal_scroll(driver) -> bool:
    """Nothing sticks out sideways: the page is as wide as the viewport."""
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
        " && document.body.scrollWidth <= window.innerWidth")


def wait(driver, condition, timeout=30, message=""):
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d), message)


def open_page(driver, url: str, hash_: str = "#/chat"):
    target = url + "/" + hash_
    if driver.current_url == target:
        driver.refresh()  # a get() of the same address with a fragment would not reload
    else:
        driver.get(target)
    wait(driver, lambda d: d.execute_script("return document.body.dataset.ready === 'true'"),
         message="the page did not finish starting")


def set_viewport(driver, size):
    """Emulates a viewport of `size` CSS pixels (a headless window cannot be narrower than
    500 px); DESKTOP returns to the window's own size."""
    if size == DESKTOP:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        return
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": size[0], "height": size[1], "deviceScaleFactor": 2 if size == PHONE else 1,
        "mobile": size == PHONE,
    })


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(driver, name: str):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def throttle(driver, bytes_per_second: int):
    """Slows what the page downloads, so a streaming reply is seen growing chunk by chunk."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0,
        "downloadThroughput": bytes_per_second, "uploadThroughput": -1,
    })
