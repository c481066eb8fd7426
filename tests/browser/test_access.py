"""The web app and the API side by side: with --api-key the page asks for the key and keeps it
in the browser only; --no-ui serves no page; the API's 404s are unchanged; the Markdown
renderer turns model text into safe markup."""

import json

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import CHAT_MODEL, Server, open_page, screenshot, wait

KEY = "browser-test-key"


@pytest.fixture(scope="module")
def keyed_server():
    s = Server("--api-key", KEY)
    yield s
    s.stop()


def test_api_key_prompt_keeps_the_key_in_the_browser(keyed_server, browser):
    open_page(browser, keyed_server.url)
    dialog = browser.find_element(By.ID, "key-dialog")
    wait(browser, lambda d: dialog.is_displayed(), message="no key prompt")
    screenshot(browser, "api-key-prompt")
    field = browser.find_element(By.ID, "key-input")
    field.send_keys("wrong")
    browser.find_element(By.ID, "key-save").click()
    wait(browser, lambda d: "refused" in d.find_element(By.ID, "key-error").text)
    assert dialog.is_displayed()
    field.clear()
    field.send_keys(KEY)
    browser.find_element(By.ID, "key-save").click()
    wait(browser, lambda d: not dialog.is_displayed())
    wait(browser, lambda d: any(o.get_attribute("value") == CHAT_MODEL
                                for o in Select(d.find_element(By.ID, "model")).options))
    assert browser.execute_script("return localStorage.getItem('sluice.apiKey')") == KEY
    assert browser.get_cookies() == []
    # After a reload the stored key is used without asking again.
    open_page(browser, keyed_server.url, "#/dashboard")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#pool tbody tr"))
    assert not dialog.is_displayed()


def test_page_is_public_but_the_api_still_needs_the_key(keyed_server):
    assert keyed_server.get("/")[0] == 200
    keyed_server.key = None
    try:
        assert keyed_server.get("/v1/models")[0] == 401
        assert keyed_server.get("/admin/models")[0] == 401
    finally:
        keyed_server.key = KEY


def test_api_404s_are_unchanged_next_to_the_page(server):
    for path in ["/v1/nope", "/ui/nope.js", "/ui/a/b.js", "/index.html"]:
        status, body = server.get(path)
        assert status == 404, path
        assert json.loads(body)["error"]["code"] == "not_found", path
    status, body = server.get("/ui/main.js")
    assert status == 200 and "import" in body


def test_no_ui_serves_no_page():
    s = Server("--no-ui")
    try:
        for path in ["/", "/ui/main.js", "/ui/index.html"]:
            status, body = s.get(path)
            assert status == 404, path
            assert json.loads(body)["error"]["code"] == "not_found"
        assert s.get("/v1/models")[0] == 200
    finally:
        s.stop()


MARKDOWN_CASES = [
    ("**bold** and *em* and `code`", "<p><strong>bold</strong> and <em>em</em> and <code>code</code></p>"),
    ("# Title\n\ntext", "<h3>Title</h3><p>text</p>"),
    ("```rust\nfn main() {}\n```", '<pre tabindex="0"><code class="language-rust">fn main() {}</code>'
     '<span class="code-lang" aria-hidden="true">rust</span></pre>'),
    ("- a\n- b\n  - c", "<ul><li>a</li><li>b<ul><li>c</li></ul></li></ul>"),
    ("3. x\n4. y", '<ol start="3"><li>x</li><li>y</li></ol>'),
    ("| a | b |\n|---|--:|\n| 1 | 2 |", '<table><thead><tr><th>a</th><th style="text-align: right;">b</th></tr></thead>'
     '<tbody><tr><td>1</td><td style="text-align: right;">2</td></tr></tbody></table>'),
    ("> quoted", "<blockquote><p>quoted</p></blockquote>"),
    ("[site](https://example.org)", '<p><a href="https://example.org" rel="noopener noreferrer" target="_blank">site</a></p>'),
    # Script cannot get in: not by link scheme, not by raw HTML.
    ("[x](javascript:alert(1))", "<p>[x](javascript:alert(1))</p>"),
    ("<img src=x onerror=alert(1)>", "<p>&lt;img src=x onerror=alert(1)&gt;</p>"),
    ("snake_case_name stays", "<p>snake_case_name stays</p>"),
    # A fence still streaming in renders as code so far.
    ("```py\nprint(1)", '<pre tabindex="0"><code class="language-py">print(1)</code><span class="code-lang" aria-hidden="true">py</span></pre>'),
]


def test_markdown_renderer_builds_safe_markup(server, browser):
    open_page(browser, server.url)
    got = browser.execute_script("""
        const { renderMarkdown } = await import('/ui/markdown.js');
        return arguments[0].map((src) => {
          const div = document.createElement('div');
          div.append(renderMarkdown(src));
          return div.innerHTML;
        });""", [src for src, _ in MARKDOWN_CASES])
    for (src, want), have in zip(MARKDOWN_CASES, got):
        assert have == want, src
