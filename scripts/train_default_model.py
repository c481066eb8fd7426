#!/usr/bin/env python3
"""Trains sluice's bundled default model, `models/sluice-kjv-mini`, from scratch on CPU.

A small Llama-architecture model (transformers' LlamaForCausalLM) with its own byte-level BPE
tokenizer, trained on the King James Version from Debian's `bible-kjv-text` package. Most
training text is plain prose (one chapter per document); a fraction of the verses are also
formatted as ChatML conversations so that chat requests get verse-like answers.

Reproduce (about 45 minutes on one CPU thread):

    apt-get install -y bible-kjv-text bible-kjv
    pip install torch transformers tokenizers safetensors numpy matplotlib
    python3 scripts/train_default_model.py

Everything is seeded; `--resume` continues from the last checkpoint in `--work-dir`.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import kjv_corpus, model_card  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class Settings:
    """Every knob of a run; written into the README and the checkpoint."""

    seed: int
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    context: int
    seq_len: int
    batch_size: int
    steps: int
    warmup_steps: int
    lr: float
    min_lr_ratio: float
    weight_decay: float
    grad_clip: float
    chat_fraction: float
    val_every_chapter: int
    eval_every: int
    eval_windows: int
    checkpoint_every: int
    threads: int
    time_budget_minutes: float


def parse_args() -> tuple[Settings, argparse.Namespace]:
    """Command-line flags: the run's Settings plus where to read and write."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=REPO_ROOT / "models" / "sluice-kjv-mini")
    p.add_argument("--work-dir", type=Path, default=REPO_ROOT / "target" / "train-kjv-mini")
    p.add_argument("--resume", action="store_true", help="continue from work-dir/checkpoint.pt")
    p.add_argument("--seed", type=int, default=1611)
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--intermediate-size", type=int, default=768)
    p.add_argument("--num-layers", type=int, default=4)
    p.add_argument("--num-heads", type=int, default=4)
    p.add_argument("--num-kv-heads", type=int, default=2)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--steps", type=int, default=700)
    p.add_argument("--warmup-steps", type=int, default=50)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--chat-fraction", type=float, default=0.3)
    p.add_argument("--val-every-chapter", type=int, default=50)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--eval-windows", type=int, default=16)
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--time-budget-minutes",
        type=float,
        default=55.0,
        help="stop early (keeping the last checkpoint's model) once training has run this long",
    )
    args = p.parse_args()
    fields = Settings.__dataclass_fields__
    settings = Settings(**{k: v for k, v in vars(args).items() if k in fields})
    return settings, args


def seed_everything(seed: int) -> None:
    """Seeds Python, NumPy and torch, and asks torch for deterministic kernels."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)


def train_tokenizer(texts: list[str], vocab_size: int) -> Tokenizer:
    """A byte-level BPE tokenizer with the three special tokens at ids 0, 1, 2."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=kjv_corpus.SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    for index, token in enumerate(kjv_corpus.SPECIAL_TOKENS):
        if tok.token_to_id(token) != index:
            raise RuntimeError(f"special token {token} did not get id {index}")
    for token_id in range(tok.get_vocab_size()):
        if tok.decode([token_id], skip_special_tokens=False) == "":
            raise RuntimeError(f"token id {token_id} decodes to nothing")
    return tok


def encode_stream(tok: Tokenizer, documents: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """All documents as one token stream, each followed by <|endoftext|>.

    Returns (tokens [n_tokens] int64, document start offsets [n_documents] int64).
    """
    eot = tok.token_to_id(kjv_corpus.ENDOFTEXT)
    encoded = tok.encode_batch(documents, add_special_tokens=False)
    starts, pieces, offset = [], [], 0
    for enc in encoded:
        starts.append(offset)
        pieces.append(np.asarray(enc.ids + [eot], dtype=np.int64))
        offset += len(enc.ids) + 1
    return np.concatenate(pieces), np.asarray(starts, dtype=np.int64)


def sample_windows(
    stream: np.ndarray, starts: np.ndarray, count: int, length: int, rng: np.random.Generator
) -> torch.Tensor:
    """`count` windows of `length` + 1 tokens: half begin at a document start, half anywhere.

    Returns [count, length + 1] int64.
    """
    limit = len(stream) - length - 1
    aligned = starts[starts < limit]
    offsets = [
        int(rng.choice(aligned)) if rng.random() < 0.5 else int(rng.integers(0, limit))
        for _ in range(count)
    ]
    return torch.from_numpy(np.stack([stream[o : o + length + 1] for o in offsets]))


def learning_rate(step: int, s: Settings) -> float:
    """Linear warm-up to `lr`, then cosine decay to `lr * min_lr_ratio` at the last step."""
    if step < s.warmup_steps:
        return s.lr * (step + 1) / s.warmup_steps
    progress = min(1.0, (step - s.warmup_steps) / max(1, s.steps - s.warmup_steps))
    floor = s.lr * s.min_lr_ratio
    return floor + (s.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_model(s: Settings) -> LlamaForCausalLM:
    """A freshly initialised LlamaForCausalLM with tied embeddings and grouped-query attention."""
    config = LlamaConfig(
        vocab_size=s.vocab_size,
        hidden_size=s.hidden_size,
        intermediate_size=s.intermediate_size,
        num_hidden_layers=s.num_layers,
        num_attention_heads=s.num_heads,
        num_key_value_heads=s.num_kv_heads,
        head_dim=s.hidden_size // s.num_heads,
        max_position_embeddings=s.context,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        hidden_act="silu",
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        attention_bias=False,
        mlp_bias=False,
        initializer_range=0.02,
    )
    return LlamaForCausalLM(config)


def make_optimizer(model: torch.nn.Module, s: Settings) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on norms)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": s.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=s.lr, betas=(0.9, 0.95), eps=1e-8)


@torch.no_grad()
def evaluate(model: LlamaForCausalLM, windows: torch.Tensor, batch_size: int) -> float:
    """Mean next-token loss over fixed windows [n, seq_len + 1]."""
    model.eval()
    losses = []
    for i in range(0, len(windows), batch_size):
        batch = windows[i : i + batch_size]
        losses.append(lm_loss(model, batch).item())
    model.train()
    return float(np.mean(losses))


def lm_loss(model: LlamaForCausalLM, batch: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of a batch [b, seq_len + 1]."""
    logits = model(input_ids=batch[:, :-1]).logits  # [b, seq_len, vocab]
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1)
    )


def save_tokenizer(tok: Tokenizer, s: Settings, out: Path) -> None:
    """tokenizer.json plus a tokenizer_config.json that carries the ChatML template."""
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token=kjv_corpus.ENDOFTEXT,
        pad_token=kjv_corpus.ENDOFTEXT,
        unk_token=None,
        model_max_length=s.context,
    )
    fast.save_pretrained(out)
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = CHAT_TEMPLATE
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["bos_token"] = None
    config["clean_up_tokenization_spaces"] = False
    config["additional_special_tokens"] = [kjv_corpus.IM_START, kjv_corpus.IM_END]
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    (out / "chat_template.jinja").unlink(missing_ok=True)
    (out / "special_tokens_map.json").unlink(missing_ok=True)


def export_model(model: LlamaForCausalLM, tok: Tokenizer, s: Settings, out: Path) -> None:
    """Writes a Hugging Face directory with float16 safetensors weights."""
    out.mkdir(parents=True, exist_ok=True)
    half = LlamaForCausalLM(model.config).to(torch.float16)
    half.load_state_dict({k: v.to(torch.float16) for k, v in model.state_dict().items()})
    half.config.max_position_embeddings = s.context
    half.generation_config = GenerationConfig(
        bos_token_id=0,
        eos_token_id=[tok.token_to_id(kjv_corpus.ENDOFTEXT), tok.token_to_id(kjv_corpus.IM_END)],
        pad_token_id=tok.token_to_id(kjv_corpus.ENDOFTEXT),
        do_sample=True,
        temperature=0.8,
    )
    half.save_pretrained(out, safe_serialization=True)
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    # transformers 5 writes `dtype`; older readers (and sluice) also accept `torch_dtype`.
    config["dtype"] = "float16"
    config["torch_dtype"] = "float16"
    # transformers 5 nests rope_theta in `rope_parameters`; most readers look for it at the top.
    config["rope_theta"] = config["rope_parameters"]["rope_theta"]
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    save_tokenizer(tok, s, out)


def save_checkpoint(
    path: Path,
    model: LlamaForCausalLM,
    optimizer: torch.optim.Optimizer,
    step: int,
    rng: np.random.Generator,
    s: Settings,
    elapsed: float,
) -> None:
    """Model, optimizer and sampler state, so `--resume` continues the same run."""
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": step,
            "rng": rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            "settings": asdict(s),
            "elapsed": elapsed,
        },
        tmp,
    )
    tmp.replace(path)


def main() -> None:
    """Extracts the corpus, trains tokenizer and model, exports, samples and writes the README."""
    s, args = parse_args()
    torch.set_num_threads(s.threads)
    seed_everything(s.seed)
    args.work_dir.mkdir(parents=True, exist_ok=True)

    version = kjv_corpus.package_version(kjv_corpus.TEXT_PACKAGE)
    chapters = kjv_corpus.parse_chapters(kjv_corpus.read_bible_text())
    train_ch, val_ch = kjv_corpus.split_chapters(chapters, s.val_every_chapter)
    doc_rng = random.Random(s.seed)
    train_docs = kjv_corpus.plain_documents(train_ch) + kjv_corpus.chat_documents(train_ch, s.chat_fraction, doc_rng)
    val_docs = kjv_corpus.plain_documents(val_ch) + kjv_corpus.chat_documents(val_ch, s.chat_fraction, doc_rng)
    doc_rng.shuffle(train_docs)
    doc_rng.shuffle(val_docs)
    n_verses = sum(len(c.verses) for c in chapters)
    print(f"{len(chapters)} chapters, {n_verses} verses; {len(train_docs)} train / {len(val_docs)} val documents")

    tok = train_tokenizer(train_docs, s.vocab_size)
    train_stream, train_starts = encode_stream(tok, train_docs)
    val_stream, val_starts = encode_stream(tok, val_docs)
    print(f"tokens: {len(train_stream)} train, {len(val_stream)} val")
    val_windows = sample_windows(val_stream, val_starts, s.eval_windows, s.seq_len, np.random.default_rng(s.seed + 1))

    model = build_model(s)
    optimizer = make_optimizer(model, s)
    rng = np.random.default_rng(s.seed)
    ckpt_path = args.work_dir / "checkpoint.pt"
    log_path = args.work_dir / "loss.csv"
    step, elapsed_before = 0, 0.0
    if args.resume and ckpt_path.exists():
        ckpt = torch.load(ckpt_path, weights_only=False)
        if ckpt["settings"] != asdict(s):
            raise SystemExit("checkpoint was made with different settings; drop --resume or match them")
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        rng.bit_generator.state = ckpt["rng"]
        torch.set_rng_state(ckpt["torch_rng"])
        step, elapsed_before = ckpt["step"], ckpt["elapsed"]
        print(f"resumed at step {step}")
    else:
        log_path.write_text("step,train_loss,val_loss,lr,elapsed_s,tokens_seen\n")

    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters")
    model.train()
    start = time.monotonic()
    recent: list[float] = []
    stopped_early = False
    while step < s.steps:
        elapsed = elapsed_before + time.monotonic() - start
        if elapsed > s.time_budget_minutes * 60:
            stopped_early = True
            print(f"time budget reached at step {step}")
            break
        lr = learning_rate(step, s)
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = sample_windows(train_stream, train_starts, s.batch_size, s.seq_len, rng)
        loss = lm_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
        optimizer.step()
        recent.append(loss.item())
        step += 1
        if step % 10 == 0:
            print(f"step {step} loss {np.mean(recent[-10:]):.4f} lr {lr:.2e} {elapsed:.0f}s", flush=True)
        if step % s.eval_every == 0 or step == s.steps:
            val = evaluate(model, val_windows, s.batch_size)
            train_loss = float(np.mean(recent))
            recent = []
            elapsed = elapsed_before + time.monotonic() - start
            with log_path.open("a") as f:
                f.write(f"{step},{train_loss:.4f},{val:.4f},{lr:.6g},{elapsed:.1f},{step * s.batch_size * s.seq_len}\n")
            print(f"== step {step} train {train_loss:.4f} val {val:.4f}", flush=True)
        if step % s.checkpoint_every == 0 or step == s.steps:
            elapsed = elapsed_before + time.monotonic() - start
            save_checkpoint(ckpt_path, model, optimizer, step, rng, s, elapsed)
            export_model(model, tok, s, args.out)

    wall = elapsed_before + time.monotonic() - start
    if stopped_early:
        # Keep the model of the last checkpoint, whose loss the CSV records.
        ckpt = torch.load(ckpt_path, weights_only=False)
        model.load_state_dict(ckpt["model"])
        step = ckpt["step"]
    export_model(model, tok, s, args.out)

    loaded = AutoModelForCausalLM.from_pretrained(args.out)
    tokenizer = AutoTokenizer.from_pretrained(args.out)
    samples = model_card.sample_outputs(loaded, tokenizer, s.seed)
    for prompt, text in samples:
        print(f"--- {prompt!r}\n{text}")
    rows = list(csv.DictReader(log_path.open()))
    (args.out / "loss.csv").write_text(log_path.read_text())
    model_card.write_plot(rows, args.out / "loss.svg")
    model_card.write_readme(
        out=args.out,
        settings=asdict(s),
        rows=rows,
        samples=samples,
        n_params=n_params,
        corpus={
            "package": kjv_corpus.TEXT_PACKAGE,
            "version": version,
            "chapters": len(chapters),
            "verses": n_verses,
            "train_chapters": len(train_ch),
            "val_chapters": len(val_ch),
            "train_tokens": len(train_stream),
            "val_tokens": len(val_stream),
        },
        steps_done=step,
        wall_seconds=wall,
        stopped_early=stopped_early,
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
