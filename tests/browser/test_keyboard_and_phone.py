"""The page with the keyboard alone and at phone width: a skip link, visible focus, chat sent
with Enter, the mode tabs moved with the arrow keys, the dashboard's buttons pressed with Enter
(focus stays on the row across the table's redraw); at 390 px nothing sticks out sideways."""

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import (
    DESKTOP, PHONE, SECOND_MODEL, console_errors, no_horizontal_scroll, open_page, pool_row, set_viewport, wait,
)


def press(driver, *keys):
    ActionChains(driver).send_keys(*keys).perform()


def focused(driver):
    """(id, aria-label, text) of the focused element."""
    return driver.execute_script(
        "const e = document.activeElement;"
        "return [e.id, e.getAttribute('aria-label') || '', (e.textContent || '').trim().slice(0, 40)];")


def focus_ring_visible(driver):
    return driver.execute_script(
        "const s = getComputedStyle(document.activeElement);"
        "return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2;")


def tab_until(driver, predicate, limit=40, back=False):
    """Presses Tab (Shift+Tab with `back`) until the focused element satisfies `predicate`;
    every element reached on the way shows a focus ring."""
    for _ in range(limit):
        if back:
            ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
        else:
            press(driver, Keys.TAB)
        now = focused(driver)
        assert focus_ring_visible(driver), f"no visible focus on {now}"
        if predicate(now):
            return now
    raise AssertionError(f"not reached with {limit} presses of Tab")


def test_chat_with_the_keyboard_alone(server, browser):
    open_page(browser, server.url)
    press(browser, Keys.TAB)
    assert browser.switch_to.active_element.get_attribute("class") == "skip"
    press(browser, Keys.ENTER)
    wait(browser, lambda d: focused(d)[0] == "main")
    # The mode tabs move with the arrow keys.
    tab_until(browser, lambda f: f[0] == "mode-chat")
    press(browser, Keys.ARROW_RIGHT)
    wait(browser, lambda d: focused(d)[0] == "mode-raw")
    assert browser.find_element(By.ID, "raw-pane").is_displayed()
    assert not browser.find_element(By.ID, "chat-pane").is_displayed()
    press(browser, Keys.ARROW_LEFT)
    wait(browser, lambda d: focused(d)[0] == "mode-chat")
    assert browser.find_element(By.ID, "chat-pane").is_displayed()
    # Tab reaches the message box; Enter sends, Shift+Enter is a new line.
    tab_until(browser, lambda f: f[0] == "prompt")
    press(browser, "In the beginning")
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    press(browser, "and then", Keys.ENTER)
    wait(browser, lambda d: d.find_element(By.ID, "regenerate").is_enabled(), timeout=60)
    user = browser.find_elements(By.CSS_SELECTOR, "#messages .message.user .body")[-1].text
    assert user == "In the beginning\nand then"
    # Back up to the message's Edit button; Enter opens the editor with the focus in it.
    tab_until(browser, lambda f: f[1] == "Edit and branch", back=True)
    press(browser, Keys.ENTER)
    wait(browser, lambda d: focused(d)[1] == "Edited message")
    tab_until(browser, lambda f: f[2] == "Cancel")
    press(browser, Keys.ENTER)
    wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "#messages textarea"))
    assert console_errors(browser) == []


def test_dashboard_buttons_work_from_the_keyboard(server, browser):
    if server.model_status(SECOND_MODEL) != "loaded":
        assert server.post(f"/admin/models/{SECOND_MODEL}/load") == 200
    open_page(browser, server.url)
    try:
        tab_until(browser, lambda f: f[0] == "nav-dashboard")
        press(browser, Keys.ENTER)
        wait(browser, lambda d: d.find_element(By.ID, "view-dashboard").is_displayed())
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f"button[aria-label='Pin {SECOND_MODEL}']"))
        tab_until(browser, lambda f: f[1] == f"Pin {SECOND_MODEL}", limit=60)
        press(browser, Keys.ENTER)
        wait(browser, lambda d: (pool_row(d, SECOND_MODEL) or {}).get("pinned") == "true")
        # The button became Unpin; focus stayed on the row, so Enter again unpins.
        wait(browser, lambda d: focused(d)[1] == f"Unpin {SECOND_MODEL}")
        press(browser, Keys.ENTER)
        wait(browser, lambda d: (pool_row(d, SECOND_MODEL) or {}).get("pinned") == "false")
    finally:
        server.post(f"/admin/models/{SECOND_MODEL}/unpin")
    assert console_errors(browser) == []


def test_phone_width_fits_without_sideways_scrolling(server, browser):
    set_viewport(browser, PHONE)
    try:
        open_page(browser, server.url)
        assert browser.execute_script("return window.innerWidth") == PHONE[0]
        assert no_horizontal_scroll(browser)
        # The settings start folded; the message box and Send are on screen.
        assert browser.find_element(By.CSS_SELECTOR, ".settings details").get_attribute("open") is None
        for id_ in ["prompt", "send"]:
            rect = browser.find_element(By.ID, id_).rect
            assert rect["x"] >= 0 and rect["x"] + rect["width"] <= PHONE[0], (id_, rect)
        open_page(browser, server.url, "#/dashboard")
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#pool tbody tr"))
        assert no_horizontal_scroll(browser)
        # The wide pool table scrolls inside its own box; the charts fit the width.
        for chart in browser.find_elements(By.CSS_SELECTOR, "#charts .chart"):
            assert chart.rect["x"] + chart.rect["width"] <= PHONE[0], chart.rect
    finally:
        set_viewport(browser, DESKTOP)
    assert console_errors(browser) == []
