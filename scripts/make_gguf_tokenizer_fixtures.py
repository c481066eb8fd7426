#!/usr/bin/env python3
"""Writes the vocab-only GGUF fixtures under fixtures/gguf-tokenizer/ and the token ids that the
Hugging Face tokenizer and llama.cpp's `llama-tokenize` give for a corpus of tricky text.

The Rust tests (crates/text/tests/gguf_tokenizer.rs) build sluice's tokenizer from each GGUF
file's metadata alone and compare its ids with both references, so they need neither Python nor
llama.cpp.

Vocabularies:
- `bpe-tiny.gguf`: the 512-token byte-level BPE of fixtures/models/*/tokenizer.json (pre `gpt-2`).
- `kjv.gguf`: the bundled model's 4096-token byte-level BPE (models/sluice-kjv-mini), with its
  chat template.
- `bpe-wide.gguf`: a 1,600-token byte-level BPE trained here *without* a pre-tokenizer, so its
  merges cross word, digit and whitespace boundaries and every pre-tokenizer regex gives
  different ids. Stored with pre `gpt-2`; the references are computed once per pre-tokenizer
  (`default`, `gpt-2`, `llama-bpe`, `qwen2`, `smollm`, `tekken`, `gpt-4o`) from temporary copies that
  differ only in `tokenizer.ggml.pre`, and the Rust test swaps that key in memory the same way.
- `spm.gguf`: a 1,000-piece SentencePiece BPE model (byte fallback, control and user-defined
  symbols) trained here with the `sentencepiece` package; GGUF model `llama`.

The Hugging Face references come from `tokenizers` with the pre-tokenizer each model family
ships in its tokenizer.json (Llama 3, Qwen2, SmolLM, Mistral Nemo/tekken, GPT-4o, GPT-2). llama.cpp's
`default` has no Hugging Face original; its reference is the same four regex splits as a
`Sequence` of `Split`s. The SentencePiece reference is transformers' Llama conversion in its
`legacy` form (normalizer `Prepend("▁")` + `Replace(" ", "▁")`, as Llama 2's own tokenizer.json):
transformers 5 writes a `Metaspace` pre-tokenizer instead, which does not add the `▁` to text
that already starts with a space, unlike SentencePiece and llama.cpp (the script checks the
legacy form against the `sentencepiece` library itself).

Usage (the fixtures are committed; re-run only to change them):
  python3 scripts/make_gguf_tokenizer_fixtures.py --llama-tokenize PATH/llama-tokenize
Needs gguf, sentencepiece, tokenizers, transformers (pip).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import subprocess
import tempfile
from pathlib import Path

import gguf
import sentencepiece as spm
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "gguf-tokenizer"
# Training text is read from this commit, so re-running the script gives the same vocabularies.
CORPUS_COMMIT = "ab50a958e5b679da8b1220fac4f89b3e0bd7897b"
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# A token of `bpe-wide` that its merges never build (see train_wide_bpe).
UNMERGED_WORD = "Ġsluicegate"

# The text every vocabulary is checked on: whitespace runs, digits, CJK, emoji, code, special
# tokens written in text, leading spaces, contractions, mixed case.
CORPUS = [
    "Hello world",
    " Hello world",
    "   three leading spaces",
    "trailing spaces   ",
    "a  b   c    d     e",
    "line one\nline two\n\nline four\n",
    "\n\n\nleading newlines",
    "tabs\tand\t\ttabs \t mixed",
    "windows\r\nline\r\nendings",
    "numbers 1234567890 and 3.14159 and 1,000,000 and 42",
    "x=12345678; y=0.5e-10; v2.0.1",
    "CJK 你好，世界！ 日本語のテキスト 한국어 문장",
    "emoji 🙂👍🏽 family 👨‍👩‍👧 flag 🇫🇷 done",
    "def square(x):\n    return x ** 2  # comment\n",
    "fn main() {\n\tlet v: Vec<u32> = (0..10).collect();\n}",
    "if (a != b && c <= d) { return -1; } // done",
    "I'm sure they've done what you'd say; it's HE'LL and we'RE 'quoted'",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "text<|im_end|>more <|im_start|> spaced <|endoftext|>",
    "Ünïcödé àccénts ÉCOLE école naïve Straße",
    "camelCase HTTPServer XMLHttpRequest iPhone McDonald",
    "ｆｕｌｌｗｉｄｔｈ　ｓｐａｃｅ and nbsp\u00a0here",
    "The LORD is my shepherd; I shall not want.",
    "open the sluicegate, then the sluice gate",
    "<s>bos in text</s> and <unk> and <tool> and <0x41>",
    "!!! ??? ... --- *** ### @@@ $$$ %%%",
    "    ",
]

# Pre-tokenizer regexes as the model families' tokenizer.json files write them.
GPT2_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN2_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
TEKKEN_REGEX = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
    r"""|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

GPT4O_REGEX = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def byte_level(use_regex: bool) -> pre_tokenizers.ByteLevel:
    return pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=use_regex)


def split(regex: str) -> pre_tokenizers.Split:
    return pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False)


# GGUF `tokenizer.ggml.pre` -> (Hugging Face pre-tokenizer, BPE ignore_merges).
HF_PRE_TOKENIZERS = {
    "gpt-2": (byte_level(True), False),
    "llama-bpe": (pre_tokenizers.Sequence([split(LLAMA3_REGEX), byte_level(False)]), True),
    "qwen2": (pre_tokenizers.Sequence([split(QWEN2_REGEX), byte_level(False)]), False),
    "smollm": (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level(True)]),
        False,
    ),
    "tekken": (pre_tokenizers.Sequence([split(TEKKEN_REGEX), byte_level(False)]), True),
    "gpt-4o": (pre_tokenizers.Sequence([split(GPT4O_REGEX), byte_level(False)]), False),
    "default": (
        pre_tokenizers.Sequence(
            [
                split(r"[\p{P}\$\+<=>\^~\|]+"),
                split(GPT2_REGEX),
                split(r"\p{N}+"),
                split(r"[0-9][0-9][0-9]"),
                byte_level(False),
            ]
        ),
        False,
    ),
}


def training_lines() -> list[str]:
    """Repository docs and sources at CORPUS_COMMIT plus generated lines of digits, CJK, emoji
    and whitespace, so the vocabularies have merges for all of them."""
    names = subprocess.run(
        ["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", CORPUS_COMMIT],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    wanted = [n for n in names if n.endswith((".md", ".rs"))][:60]
    lines = []
    for name in wanted:
        text = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{CORPUS_COMMIT}:{name}"],
            check=True, capture_output=True, text=True,
        ).stdout
        lines.extend(line for line in text.split("\n") if line.strip())
    rng = random.Random(13)
    cjk = "你好世界日本語のテキスト한국어문장中文字符测试数据模型"
    emoji = "🙂👍🏽👨‍👩‍👧🇫🇷🚀✨"
    for _ in range(400):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 9)))
        spaces = " " * rng.randint(1, 6)
        han = "".join(rng.choice(cjk) for _ in range(rng.randint(2, 6)))
        lines.append(f"{digits}{spaces}{han}{rng.choice(emoji)}\n\t{digits[::-1]}.{digits}")
    return lines


def vocab_only_writer(path: Path, name: str) -> gguf.GGUFWriter:
    """A GGUF writer with the few `llama` hyper-parameters llama.cpp reads before the vocab."""
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_name(name)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(16)
    return w


def finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_bpe_gguf(path: Path, tok: Tokenizer, pre: str, *, eos: str, bos: str | None,
                   pad: str | None, chat_template: str | None) -> None:
    """What convert_hf_to_gguf.py writes for a byte-level BPE tokenizer.json."""
    state = json.loads(tok.to_str())
    vocab = dict(state["model"]["vocab"])
    added = {t["content"]: t for t in state["added_tokens"]}
    vocab.update((t["content"], t["id"]) for t in state["added_tokens"])
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    types = []
    for text in tokens:
        if text in added:
            types.append(gguf.TokenType.CONTROL if added[text]["special"] else gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in state["model"]["merges"]]
    w = vocab_only_writer(path, path.stem)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(vocab[eos])
    if bos is not None:
        w.add_bos_token_id(vocab[bos])
    if pad is not None:
        w.add_pad_token_id(vocab[pad])
    w.add_add_bos_token(False)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    finish(w)


def with_pre(tok_json: str, pre: str) -> Tokenizer:
    """The Hugging Face tokenizer for `tok_json`'s vocabulary with `pre`'s pre-tokenizer."""
    tok = Tokenizer.from_str(tok_json)
    pre_tokenizer, ignore_merges = HF_PRE_TOKENIZERS[pre]
    tok.pre_tokenizer = pre_tokenizer
    state = json.loads(tok.to_str())
    state["model"]["ignore_merges"] = ignore_merges
    return Tokenizer.from_str(json.dumps(state))


def train_wide_bpe(lines: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = byte_level(False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1600,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|eot_id|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer)
    # A word no merge sequence reaches: only pre-tokenizers with `ignore_merges` (Llama 3,
    # tekken) give it as one token.
    state = json.loads(tok.to_str())
    state["model"]["vocab"][UNMERGED_WORD] = len(state["model"]["vocab"])
    tok = Tokenizer.from_str(json.dumps(state))
    # A user-defined (not special) token, as fine-tunes add them.
    tok.add_tokens(["<tool>"])
    return tok


def train_spm(lines: list[str], work: Path) -> Path:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        model_type="bpe",
        vocab_size=1000,
        byte_fallback=True,
        character_coverage=1.0,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        control_symbols=["<|im_start|>", "<|im_end|>"],
        user_defined_symbols=["<tool>"],
        max_sentence_length=100000,
        num_threads=1,
        minloglevel=2,
    )
    path = work / "tokenizer.model"
    path.write_bytes(model.getvalue())
    return path


def write_spm_gguf(path: Path, model_path: Path) -> None:
    """What convert_hf_to_gguf.py writes for a SentencePiece tokenizer.model."""
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(gguf.TokenType.UNKNOWN)
        elif sp.is_control(i):
            types.append(gguf.TokenType.CONTROL)
        elif sp.is_unused(i):
            types.append(gguf.TokenType.UNUSED)
        elif sp.is_byte(i):
            types.append(gguf.TokenType.BYTE)
        elif sp.IdToPiece(i) == "<tool>":
            types.append(gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    w = vocab_only_writer(path, path.stem)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.add_chat_template(CHAT_TEMPLATE)
    finish(w)


def hf_spm_tokenizer(model_path: Path) -> Tokenizer:
    """transformers' Llama conversion of the SentencePiece model, in its legacy form."""
    from transformers import LlamaTokenizer

    hf = LlamaTokenizer.from_pretrained(str(model_path.parent), legacy=True, add_bos_token=True)
    state = json.loads(hf.backend_tokenizer.to_str())
    assert state["pre_tokenizer"]["type"] == "Metaspace", state["pre_tokenizer"]
    state["pre_tokenizer"] = None
    state["normalizer"] = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        ],
    }
    return Tokenizer.from_str(json.dumps(state))


def llama_tokenize(binary: Path, gguf_path: Path, text: str, work: Path) -> list[int]:
    prompt = work / "prompt.txt"
    prompt.write_bytes(text.encode("utf-8"))
    out = subprocess.run(
        [str(binary), "-m", str(gguf_path), "-f", str(prompt), "--ids", "--no-escape", "--log-disable"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--llama-tokenize", type=Path, help="without it, no llama.cpp ids are written")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    lines = training_lines()
    expected: dict[str, dict] = {}

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)

        def record(key: str, gguf_path: Path, hf: Tokenizer) -> None:
            hf_ids = [hf.encode(text, add_special_tokens=True).ids for text in CORPUS]
            if args.llama_tokenize is None:
                expected[key] = {"hf": hf_ids}
                return
            cpp_ids = [llama_tokenize(args.llama_tokenize, gguf_path, text, work) for text in CORPUS]
            expected[key] = {"hf": hf_ids, "llama.cpp": cpp_ids}
            same = sum(a == b for a, b in zip(hf_ids, cpp_ids))
            print(f"{key}: Hugging Face and llama.cpp agree on {same}/{len(CORPUS)} texts")

        tiny = Tokenizer.from_file(str(REPO / "fixtures/models/llama/tokenizer.json"))
        write_bpe_gguf(OUT / "bpe-tiny.gguf", tiny, "gpt-2", eos="<|im_end|>", bos="<|bos|>",
                       pad="<|pad|>", chat_template=CHAT_TEMPLATE)
        record("bpe-tiny", OUT / "bpe-tiny.gguf", tiny)

        kjv = Tokenizer.from_file(str(REPO / "models/sluice-kjv-mini/tokenizer.json"))
        kjv_config = json.loads((REPO / "models/sluice-kjv-mini/tokenizer_config.json").read_text())
        write_bpe_gguf(OUT / "kjv.gguf", kjv, "gpt-2", eos="<|endoftext|>", bos=None,
                       pad="<|endoftext|>", chat_template=kjv_config["chat_template"])
        record("kjv", OUT / "kjv.gguf", kjv)

        wide = train_wide_bpe(lines)
        write_bpe_gguf(OUT / "bpe-wide.gguf", wide, "gpt-2", eos="<|endoftext|>", bos=None,
                       pad=None, chat_template=None)
        for pre in HF_PRE_TOKENIZERS:
            variant = work / f"bpe-wide-{pre}.gguf"
            write_bpe_gguf(variant, wide, pre, eos="<|endoftext|>", bos=None, pad=None,
                           chat_template=None)
            record(f"bpe-wide:{pre}", variant, with_pre(wide.to_str(), pre))

        spm_dir = work / "spm"
        spm_dir.mkdir()
        model_path = train_spm(lines, spm_dir)
        write_spm_gguf(OUT / "spm.gguf", model_path)
        hf_spm = hf_spm_tokenizer(model_path)
        record("spm", OUT / "spm.gguf", hf_spm)
        sp = spm.SentencePieceProcessor(model_file=str(model_path))
        same = sum(
            [sp.bos_id()] + sp.encode(text) == hf_spm.encode(text).ids
            for text in CORPUS
            if "<" not in text  # the sentencepiece library does not split control symbols out
        )
        print(f"spm: the sentencepiece library agrees with the legacy HF form on {same} texts")

    payload = {"corpus": CORPUS, "expected": expected}
    (OUT / "expected.json").write_text(json.dumps(payload, ensure_ascii=False, indent=None) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
