"""Renders every template in ../shared/testdata/chat-templates with transformers, for the Rust
corpus test to compare against (tests/chat_template_corpus.rs).

Run from the repository root: `python3 crates/text/tests/data/render_chat_templates.py`.
Writes crates/text/tests/data/chat_template_renders.json: for each template file name and each
scenario ("plain": a system/user/assistant/user conversation; "tools": the same with one tool),
{"ok": text} or {"err": message}. The clock is fixed at 2025-01-15 for `strftime_now`.
"""

import datetime as real_datetime
import json
import os

import transformers.utils.chat_template_utils as chat_template_utils

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "../../../../../shared/testdata/chat-templates")
FIXED_NOW = real_datetime.datetime(2025, 1, 15, 9, 30, 0)


class FixedDatetime(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


chat_template_utils.datetime = FixedDatetime

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello there!"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "What is the capital of France?"},
]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather in a city, in °C",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
            },
        },
    }
]


def render(source, tools):
    try:
        rendered, _ = chat_template_utils.render_jinja_template(
            conversations=[MESSAGES],
            chat_template=source,
            add_generation_prompt=True,
            tools=tools,
            bos_token="<|begin_of_text|>",
            eos_token="<|end_of_text|>",
        )
        return {"ok": rendered[0]}
    except Exception as err:  # the Rust side only needs to know it failed
        return {"err": f"{type(err).__name__}: {err}"}


def main():
    out = {}
    for name in sorted(os.listdir(TEMPLATES)):
        if not name.endswith(".jinja"):
            continue
        with open(os.path.join(TEMPLATES, name)) as f:
            source = f.read()
        out[name] = {"plain": render(source, None), "tools": render(source, TOOLS)}
    with open(os.path.join(HERE, "chat_template_renders.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
