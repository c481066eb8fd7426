"""What a page on another origin can make the browser do to a local sluice: nothing that changes
state. A cross-origin POST to the admin routes (a "simple" text/plain one, or a JSON one that
needs a preflight) leaves the pool as it was; the server's own page still drives it; a DNS
name rebound to 127.0.0.1 is refused unless --allowed-hosts names it; with --admin-key the
dashboard asks for that key."""

import http.server
import json
import threading

import pytest

from selenium.webdriver.common.by import By

from conftest import CHAT_MODEL, SECOND_MODEL, Server, make_driver, open_page, pool_row, wait

ATTACK = """
const out = {};
try {
  // A "simple" request: no preflight, the answer unreadable (opaque), but it is sent.
  await fetch(arguments[0], {method: "POST", mode: "no-cors", body: "{}",
                             headers: {"Content-Type": "text/plain"}});
  out.simple = "sent";
} catch (e) { out.simple = String(e); }
try {
  const res = await fetch(arguments[0], {method: "POST", body: "{}",
                                         headers: {"Content-Type": "application/json"}});
  out.json = res.status;
} catch (e) { out.json = "blocked"; }
return out;
"""


def unloaded(server):
    if server.model_status(SECOND_MODEL) == "loaded":
        assert server.post(f"/admin/models/{SECOND_MODEL}/unload") == 200
    assert server.model_status(SECOND_MODEL) == "unloaded"


@pytest.fixture(scope="module")
def attacker():
    """Another site: a plain page (no CSP) served at http://localhost:PORT, which is not the
    sluice server's site (http://127.0.0.1:...)."""
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<!doctype html><title>elsewhere</title><p>a page on another site</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://localhost:{httpd.server_address[1]}/"
    httpd.shutdown()


def test_another_site_cannot_load_a_model(server, browser, attacker):
    unloaded(server)
    browser.get(attacker)
    wait(browser, lambda d: d.title == "elsewhere")
    got = browser.execute_script(ATTACK, f"{server.url}/admin/models/{SECOND_MODEL}/load")
    assert got["simple"] == "sent", got
    # The preflight is a 405 without CORS headers: the browser never sends the POST.
    assert got["json"] == "blocked", got
    # The simple request's answer came back before the fetch resolved.
    assert server.model_status(SECOND_MODEL) == "unloaded"


def test_the_servers_own_page_must_send_json(server, browser):
    unloaded(server)
    open_page(browser, server.url)
    got = browser.execute_script("""
        const res = await fetch(arguments[0], {method: "POST", body: "{}",
                                               headers: {"Content-Type": "text/plain"}});
        return {status: res.status, body: await res.json()};""",
        f"/admin/models/{SECOND_MODEL}/load")
    assert got["status"] == 415, got
    assert got["body"]["error"]["code"] == "unsupported_media_type"
    assert server.model_status(SECOND_MODEL) == "unloaded"
    # The page's own client sends JSON, and the same origin passes.
    got = browser.execute_script("""
        const { request } = await import('/ui/api.js');
        return await request(arguments[0], { method: "POST" });""",
        f"/admin/models/{SECOND_MODEL}/load")
    assert got["status"] == "loaded", got
    assert server.post(f"/admin/models/{SECOND_MODEL}/unload") == 200


def rebinding_browser():
    """A browser in which evil.test resolves to 127.0.0.1, as after a DNS rebinding."""
    return make_driver(extra_args=["--host-resolver-rules=MAP evil.test 127.0.0.1"])


def page_json(driver):
    # Chromium shows a JSON answer in a <pre> (its viewer may add controls beside it).
    return json.loads(driver.find_element(By.TAG_NAME, "pre").text)


def test_a_name_rebound_to_loopback_is_refused(server):
    driver = rebinding_browser()
    try:
        for path in ["/v1/models", "/admin/models", "/"]:
            driver.get(f"http://evil.test:{server.port}{path}")
            body = page_json(driver)
            assert body["error"]["code"] == "host_not_allowed", (path, body)
            assert "--allowed-hosts evil.test" in body["error"]["message"]
    finally:
        driver.quit()


def test_allowed_hosts_accepts_the_name():
    s = Server("--allowed-hosts", "evil.test")
    driver = rebinding_browser()
    try:
        open_page(driver, f"http://evil.test:{s.port}", "#/dashboard")
        wait(driver, lambda d: pool_row(d, CHAT_MODEL) is not None)
        assert driver.title.startswith("sluice")
    finally:
        driver.quit()
        s.stop()


ADMIN_KEY = "browser-admin-key"
API_KEY = "browser-api-key"


def enter_key(driver, key):
    field = driver.find_element(By.ID, "key-input")
    field.clear()
    field.send_keys(key)
    driver.find_element(By.ID, "key-save").click()


def test_with_an_admin_key_the_dashboard_asks_for_it(browser):
    s = Server("--api-key", API_KEY, "--admin-key", ADMIN_KEY)
    try:
        assert s.get("/v1/models")[0] == 200
        assert s.get("/admin/models")[0] == 401, "an API key does not open the admin routes"
        open_page(browser, s.url, "#/dashboard")
        dialog = browser.find_element(By.ID, "key-dialog")
        wait(browser, lambda d: dialog.is_displayed(), message="no key prompt")
        browser.execute_script("document.getElementById('key-error').textContent = ''")
        enter_key(browser, API_KEY)
        # The API key opens the API, the dashboard's pool asks for the admin key by name.
        wait(browser, lambda d: "admin key" in d.find_element(By.ID, "key-error").text)
        assert dialog.is_displayed()
        enter_key(browser, ADMIN_KEY)
        wait(browser, lambda d: not dialog.is_displayed())
        wait(browser, lambda d: pool_row(d, CHAT_MODEL) is not None)
    finally:
        s.stop()
