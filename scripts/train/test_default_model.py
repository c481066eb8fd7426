"""Checks of the corpus parser and of the committed models/sluice-kjv-mini directory.

Run with `python3 -m unittest discover -s scripts/train -p 'test_*.py'` (needs `tokenizers` and
`jinja2`; no network, no training, no `bible` program).
"""

from __future__ import annotations

import json
import random
import unittest
from pathlib import Path

import jinja2
from tokenizers import Tokenizer

try:
    from . import kjv_corpus
except ImportError:  # run as a top-level module by unittest discover
    import kjv_corpus

MODEL_DIR = Path(__file__).resolve().parents[2] / "models" / "sluice-kjv-mini"

READER_OUTPUT = """
Genesis 1

  1 In the beginning God created the heaven and the earth.
  2 And the earth was without form, and void.

1 Samuel 3

  10 And the LORD came, and stood, and called as at other times, Samuel, Samuel.
"""


class CorpusParsing(unittest.TestCase):
    def test_reader_output_splits_into_chapters_with_references(self) -> None:
        chapters = kjv_corpus.parse_chapters(READER_OUTPUT)
        self.assertEqual([(c.book, c.chapter, len(c.verses)) for c in chapters], [("Genesis", 1, 2), ("1 Samuel", 3, 1)])
        self.assertEqual(chapters[1].verses[0].reference, "1 Samuel 3:10")
        self.assertEqual(
            chapters[0].as_document(),
            "In the beginning God created the heaven and the earth.\nAnd the earth was without form, and void.",
        )

    def test_unknown_line_is_an_error_not_silently_dropped(self) -> None:
        with self.assertRaises(kjv_corpus.CorpusError):
            kjv_corpus.parse_chapters("Genesis 1\n  1 In the beginning\nstray text\n")

    def test_validation_chapters_are_disjoint_from_training(self) -> None:
        chapters = kjv_corpus.parse_chapters(READER_OUTPUT * 3)
        train, val = kjv_corpus.split_chapters(chapters, 3)
        self.assertEqual(len(train) + len(val), len(chapters))
        self.assertEqual(len(val), 2)

    def test_chat_documents_end_every_turn_with_im_end(self) -> None:
        chapters = kjv_corpus.parse_chapters(READER_OUTPUT)
        docs = kjv_corpus.chat_documents(chapters, 1.0, random.Random(0))
        self.assertEqual(len(docs), 3)
        for doc in docs:
            self.assertTrue(doc.endswith(kjv_corpus.IM_END + "\n"))
            self.assertEqual(doc.count(kjv_corpus.IM_START), doc.count(kjv_corpus.IM_END))


class BundledModelDirectory(unittest.TestCase):
    def test_directory_is_a_complete_hugging_face_model_under_20_mb(self) -> None:
        for name in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "README.md"]:
            self.assertTrue((MODEL_DIR / name).is_file(), name)
        total = sum(f.stat().st_size for f in MODEL_DIR.rglob("*") if f.is_file())
        self.assertLess(total, 20 * 1024 * 1024)

    def test_config_is_a_float16_llama_with_tied_embeddings(self) -> None:
        config = json.loads((MODEL_DIR / "config.json").read_text())
        self.assertEqual(config["architectures"], ["LlamaForCausalLM"])
        self.assertEqual(config["torch_dtype"], "float16")
        self.assertTrue(config["tie_word_embeddings"])
        self.assertEqual(config["hidden_size"] % config["num_attention_heads"], 0)
        self.assertEqual(config["num_attention_heads"] % config["num_key_value_heads"], 0)

    def test_every_token_id_decodes_to_text(self) -> None:
        tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        config = json.loads((MODEL_DIR / "config.json").read_text())
        self.assertEqual(tok.get_vocab_size(), config["vocab_size"])
        for token_id in range(tok.get_vocab_size()):
            self.assertNotEqual(tok.decode([token_id], skip_special_tokens=False), "", token_id)

    def test_generation_stops_on_endoftext_and_im_end(self) -> None:
        tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        eos = json.loads((MODEL_DIR / "generation_config.json").read_text())["eos_token_id"]
        self.assertEqual(sorted(eos), sorted([tok.token_to_id(kjv_corpus.ENDOFTEXT), tok.token_to_id(kjv_corpus.IM_END)]))

    def test_chat_template_renders_exactly_the_training_format(self) -> None:
        template = json.loads((MODEL_DIR / "tokenizer_config.json").read_text())["chat_template"]
        messages = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "John 3:16"},
        ]
        rendered = jinja2.Environment().from_string(template).render(messages=messages, add_generation_prompt=True)
        expected = (
            kjv_corpus.chat_turn("system", "You are a helpful assistant.")
            + kjv_corpus.chat_turn("user", "John 3:16")
            + kjv_corpus.IM_START
            + "assistant\n"
        )
        self.assertEqual(rendered, expected)
        tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        ids = tok.encode(rendered, add_special_tokens=False).ids
        self.assertEqual(ids.count(tok.token_to_id(kjv_corpus.IM_START)), 3)


if __name__ == "__main__":
    unittest.main()
