"""Images in the playground: to a model that takes images (the Gemma 3 vision fixture) an image
is attached with the file button, by pasting and by dropping, a thumbnail can be removed before
sending, and the images reach the server as `image_url` data-URL parts of the user message (read
from Chromium's own network log); to a text-only model the attach button is disabled, saying why.
"""

import base64

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from conftest import (CHAT_MODEL, ROOT, Server, console_errors, make_driver, open_page,
                      screenshot, sent_bodies, wait)

VISION_MODEL = "gemma3-vision"
IMAGES = ROOT / "fixtures" / "models" / VISION_MODEL / "images"


@pytest.fixture(scope="module")
def vision_server():
    s = Server("--model", str(ROOT / "fixtures" / "models" / VISION_MODEL), "--preload", VISION_MODEL)
    yield s
    s.stop()


@pytest.fixture
def logged_browser():
    driver = make_driver(network_log=True)
    yield driver
    driver.quit()


def data_url(name: str, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode((IMAGES / name).read_bytes()).decode()


# A File made in the page from base64, handed over in a DataTransfer as a paste or a drop.
SYNTHETIC_EVENT = """
const [kind, name, mime, b64] = arguments;
const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
const transfer = new DataTransfer();
transfer.items.add(new File([bytes], name, { type: mime }));
const event = kind === "paste"
  ? new ClipboardEvent("paste", { clipboardData: transfer, bubbles: true, cancelable: true })
  : new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true });
document.getElementById(kind === "paste" ? "prompt" : "composer").dispatchEvent(event);
"""


def synthetic(driver, kind: str, name: str, mime: str):
    b64 = base64.b64encode((IMAGES / name).read_bytes()).decode()
    driver.execute_script(SYNTHETIC_EVENT, kind, name, mime, b64)


def attached(driver):
    return driver.execute_script(
        "return [...document.querySelectorAll('#attachments img')].map((i) => i.alt)")


def test_images_attached_three_ways_reach_a_vision_model(vision_server, logged_browser):
    driver = logged_browser
    open_page(driver, vision_server.url)
    picker = Select(driver.find_element(By.ID, "model"))

    # A text-only model: no images, and the page says why.
    picker.select_by_value(CHAT_MODEL)
    attach = driver.find_element(By.ID, "attach")
    wait(driver, lambda d: not attach.is_enabled(), message="attach stayed enabled")
    assert "text only" in driver.find_element(By.ID, "attach-reason").text
    synthetic(driver, "paste", "rgb_48x20.png", "image/png")
    assert attached(driver) == []

    picker.select_by_value(VISION_MODEL)
    wait(driver, lambda d: attach.is_enabled(), message="attach stayed disabled")
    assert driver.find_element(By.ID, "attach-reason").text == ""

    # The file button's input (shown for Selenium to type a path into), a paste and a drop.
    file_input = driver.find_element(By.ID, "attach-input")
    driver.execute_script("arguments[0].hidden = false", file_input)
    file_input.send_keys(str(IMAGES / "rgb_48x20.png"))
    driver.execute_script("arguments[0].hidden = true", file_input)
    wait(driver, lambda d: len(attached(d)) == 1, message="the picked file was not attached")
    synthetic(driver, "paste", "photo420_40x64.jpg", "image/jpeg")
    wait(driver, lambda d: len(attached(d)) == 2, message="the pasted image was not attached")
    synthetic(driver, "drop", "gray_23x37.png", "image/png")
    wait(driver, lambda d: len(attached(d)) == 3, message="the dropped image was not attached")
    assert attached(driver) == ["rgb_48x20.png", "photo420_40x64.jpg", "gray_23x37.png"]
    screenshot(driver, "playground-images")

    # One removed before sending.
    driver.find_element(By.CSS_SELECTOR, "[aria-label='Remove photo420_40x64.jpg']").click()
    assert attached(driver) == ["rgb_48x20.png", "gray_23x37.png"]

    max_tokens = driver.find_element(By.ID, "p-max_tokens")
    max_tokens.clear()
    max_tokens.send_keys("6", Keys.TAB)
    sent_bodies(driver, "/v1/chat/completions")  # forget what came before
    box = driver.find_element(By.ID, "prompt")
    box.send_keys("What is in these pictures?", Keys.ENTER)
    wait(driver, lambda d: d.find_element(By.ID, "regenerate").is_enabled(), timeout=120,
         message="the reply did not finish")
    assert attached(driver) == []

    [body] = sent_bodies(driver, "/v1/chat/completions")
    assert body["model"] == VISION_MODEL
    assert body["messages"][-1] == {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url("rgb_48x20.png", "image/png")}},
        {"type": "image_url", "image_url": {"url": data_url("gray_23x37.png", "image/png")}},
        {"type": "text", "text": "What is in these pictures?"},
    ]}
    reply = driver.execute_script(
        "return JSON.parse(localStorage.getItem('sluice.conversations'))[0].messages.at(-1)")
    assert reply["role"] == "assistant" and not reply["stats"].get("error"), reply
    assert 1 <= reply["stats"]["completionTokens"] <= 6, reply
    # The two images' soft tokens are in the prompt the server counted.
    assert reply["stats"]["promptTokens"] > 2 * 16, reply
    # The sent message shows its images.
    shown = driver.find_elements(By.CSS_SELECTOR, "#messages .message.user img.thumb")
    assert len(shown) == 2
    assert console_errors(driver) == []
