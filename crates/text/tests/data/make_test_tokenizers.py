"""Writes the two tiny tokenizers the sluice-text tests load.

Run from anywhere: `python3 make_test_tokenizers.py`. Needs the `tokenizers` package only.

- byte_bpe/: byte-level BPE with Llama 3's split regex (look-ahead included, so it exercises the
  fancy-regex backend), special tokens, ChatML chat template in tokenizer_config.json.
- sentencepiece/: Llama 2 style: "▁" for spaces, byte fallback tokens <0x00>..<0xFF>, decoder
  Replace + ByteFallback + Fuse + Strip; bos/eos given as {"content": ...} objects and the chat
  template as a list of named templates.

Each directory also gets expected_encodings.json: ids the Python library produced, which the Rust
tests compare against.
"""

import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How are you today? I'm fine, thanks.",
    "Café, naïve, résumé, façade and jalapeño are borrowed words.",
    "Streaming text must never split a character: 日本語のテキスト、中文文本。",
    "Emoji too: 🙂 🚀 👍🏽 and 🇫🇷 are several bytes each.",
    "def main():\n    print('hello')\n    return 42\n",
    "Numbers like 12345 and 3.14159 appear in text; so do symbols like <tag> & 'quotes'.",
    "We'll see, they've gone, you're right, it's done, I'd say, she'll come.",
] * 20

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

LLAMA2_STYLE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported') }}{% endif %}"
    "{% endfor %}"
)

PROBES = [
    "Hello, world!",
    "The quick brown fox's tail.",
    "  leading spaces and trailing   ",
    "line one\nline two\n\n  indented",
    "Café naïve 日本語 🙂🚀 👍🏽",
    "<|im_start|>user\nhi<|im_end|>",
    "x = 12345678; y = 3.14",
]


def write(dirname, tok, config):
    out = os.path.join(HERE, dirname)
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
    expected = []
    for text in PROBES:
        plain = tok.encode(text, add_special_tokens=False).ids
        expected.append(
            {
                "text": text,
                "ids": plain,
                "ids_with_special": tok.encode(text, add_special_tokens=True).ids,
                "decoded": tok.decode(plain, skip_special_tokens=True),
            }
        )
    with open(os.path.join(out, "expected_encodings.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)


def byte_bpe():
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)]
    )
    write(
        "byte_bpe",
        tok,
        {
            "bos_token": "<|begin_of_text|>",
            "eos_token": {"content": "<|im_end|>", "lstrip": False, "rstrip": False},
            "pad_token": None,
            "chat_template": CHATML,
        },
    )


def sentencepiece():
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<unk>", "<s>", "</s>"],
        limit_alphabet=80,
        show_progress=False,
    )
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    # Train on ASCII and Latin only, so CJK and emoji must go through byte fallback.
    tok.train_from_iterator([line for line in CORPUS if line.isascii() or "Café" in line], trainer)

    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    spec["normalizer"] = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        ],
    }
    spec["pre_tokenizer"] = None
    spec["decoder"] = {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ],
    }
    tok = Tokenizer.from_str(json.dumps(spec))
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    write(
        "sentencepiece",
        tok,
        {
            "bos_token": {"content": "<s>", "lstrip": False, "normalized": False},
            "eos_token": {"content": "</s>", "lstrip": False, "normalized": False},
            "chat_template": [
                {"name": "tool_use", "template": "{{ 'tool use template' }}"},
                {"name": "default", "template": LLAMA2_STYLE},
            ],
        },
    )


if __name__ == "__main__":
    byte_bpe()
    sentencepiece()
