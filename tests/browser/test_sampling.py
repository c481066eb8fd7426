"""The playground's settings reach the server: every sampling parameter, the system prompt and
the response format (JSON mode, JSON schema) are in the request the page sends (read from
Chromium's own network log), the seed makes a regenerated reply the same, a JSON schema gives a
reply that parses, and the settings survive a reload."""

import json

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from conftest import CHAT_MODEL, console_errors, open_page, sent_bodies, wait


NAMES = ["God", "Moses", "Noah"]
SCHEMA = {"type": "object", "properties": {"who": {"enum": NAMES}}, "required": ["who"],
          "additionalProperties": False}


def set_param(driver, name, value):
    field = driver.find_element(By.ID, f"p-{name}")
    field.clear()
    field.send_keys(str(value))
    field.send_keys(Keys.TAB)  # "change" fires when the field loses focus


def send(driver, text):
    box = driver.find_element(By.ID, "prompt")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def wait_for_reply(driver):
    wait(driver, lambda d: d.find_element(By.ID, "regenerate").is_enabled(), timeout=60,
         message="the reply did not finish")
    return driver.execute_script(
        "return JSON.parse(localStorage.getItem('sluice.conversations'))[0].messages.at(-1)")


def test_sampling_parameters_and_json_schema_reach_the_server(server, logged_browser):
    driver = logged_browser
    open_page(driver, server.url)
    Select(driver.find_element(By.ID, "model")).select_by_value(CHAT_MODEL)
    for name, value in [("temperature", 0.8), ("top_p", 0.9), ("top_k", 20), ("min_p", 0.05),
                        ("max_tokens", 200), ("seed", 11)]:
        set_param(driver, name, value)
    system = driver.find_element(By.ID, "system")
    system.send_keys("Answer in JSON.")
    system.send_keys(Keys.TAB)
    Select(driver.find_element(By.ID, "p-format")).select_by_value("json_schema")
    schema = driver.find_element(By.ID, "p-schema")
    assert schema.is_displayed()
    schema.clear()
    schema.send_keys(json.dumps(SCHEMA))
    sent_bodies(driver, "/v1/chat/completions")  # forget what came before
    send(driver, "Who made the light?")
    reply = wait_for_reply(driver)
    [body] = sent_bodies(driver, "/v1/chat/completions")
    assert body["model"] == CHAT_MODEL and body["stream"] is True
    assert {k: body[k] for k in ["temperature", "top_p", "top_k", "min_p", "max_tokens", "seed"]} == {
        "temperature": 0.8, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "max_tokens": 200, "seed": 11}
    assert body["messages"] == [{"role": "system", "content": "Answer in JSON."},
                                {"role": "user", "content": "Who made the light?"}]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == SCHEMA
    # The server constrained the reply to the schema.
    assert reply["stats"]["finish"] == "stop", reply
    assert json.loads(reply["content"])["who"] in NAMES, reply["content"]

    # The seed makes a regenerated reply the same one.
    driver.find_element(By.ID, "regenerate").click()
    again = wait_for_reply(driver)
    assert again["content"] == reply["content"]
    assert sent_bodies(driver, "/v1/chat/completions") == [body]  # the same request again

    # JSON mode: any JSON object.
    Select(driver.find_element(By.ID, "p-format")).select_by_value("json_object")
    assert not driver.find_element(By.ID, "p-schema").is_displayed()
    send(driver, "And the dark?")
    reply = wait_for_reply(driver)
    [body] = sent_bodies(driver, "/v1/chat/completions")
    assert body["response_format"] == {"type": "json_object"}
    assert reply["content"].lstrip().startswith("{"), reply["content"]

    # A schema the server cannot compile is its 400, shown on the reply.
    Select(driver.find_element(By.ID, "p-format")).select_by_value("json_schema")
    schema = driver.find_element(By.ID, "p-schema")
    schema.clear()
    schema.send_keys(json.dumps({"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}))
    send(driver, "Short?")
    wait(driver, lambda d: d.find_element(By.ID, "send").is_enabled()
         and "multipleOf" in d.find_elements(By.CSS_SELECTOR, "#messages .message.assistant .failed")[-1].text
         if d.find_elements(By.CSS_SELECTOR, "#messages .message.assistant .failed") else False, timeout=30)
    failed = driver.find_elements(By.CSS_SELECTOR, "#messages .message.assistant .failed")[-1].text
    assert failed.startswith("400: "), failed
    # Chromium logs the refused request itself; nothing else went wrong.
    errors = console_errors(driver)
    assert [e["source"] for e in errors] == ["network"] and "status of 400" in errors[0]["message"], errors
    Select(driver.find_element(By.ID, "p-format")).select_by_value("json_object")

    # The settings are kept in this browser.
    open_page(driver, server.url)
    assert driver.find_element(By.ID, "p-top_k").get_attribute("value") == "20"
    assert driver.find_element(By.ID, "p-seed").get_attribute("value") == "11"
    assert driver.find_element(By.ID, "system").get_attribute("value") == "Answer in JSON."
    assert Select(driver.find_element(By.ID, "p-format")).first_selected_option.get_attribute("value") == "json_object"
    assert console_errors(driver) == []


def test_raw_completion_sends_the_prompt_as_is_with_logprobs(server, logged_browser):
    driver = logged_browser
    open_page(driver, server.url)
    Select(driver.find_element(By.ID, "model")).select_by_value(CHAT_MODEL)
    set_param(driver, "max_tokens", 6)
    Select(driver.find_element(By.ID, "p-format")).select_by_value("json_object")
    driver.find_element(By.ID, "mode-raw").click()
    prompt = driver.find_element(By.ID, "raw-prompt")
    prompt.clear()
    prompt.send_keys("And God said")
    sent_bodies(driver, "/v1/completions")
    driver.find_element(By.ID, "raw-run").click()
    wait(driver, lambda d: "finish:" in d.find_element(By.ID, "raw-stats").text, timeout=60)
    [body] = sent_bodies(driver, "/v1/completions")
    assert body["prompt"] == "And God said" and body["logprobs"] == 5 and body["max_tokens"] == 6
    # No chat template and no response format in raw mode.
    assert "messages" not in body and "response_format" not in body
    assert len(driver.find_elements(By.CSS_SELECTOR, "#raw-output .tok")) == 6
    assert console_errors(driver) == []
