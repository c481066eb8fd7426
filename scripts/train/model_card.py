"""Sample outputs, the loss plot and the README of the bundled default model."""

from __future__ import annotations

from pathlib import Path

import torch

PLAIN_PROMPTS = ["And God said", "In the beginning", "The LORD is my shepherd", "Blessed are the"]
CHAT_PROMPTS = [
    [{"role": "user", "content": "John 3:16"}],
    [{"role": "user", "content": "And the LORD spake"}],
    [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is wisdom?"},
    ],
]
SAMPLE_TEMPERATURE = 0.8
PLAIN_NEW_TOKENS = 60
CHAT_NEW_TOKENS = 80


def _generate(model, tokenizer, input_ids: torch.Tensor, max_new_tokens: int, seed: int) -> str:
    """Samples a continuation of input_ids [1, n] and decodes only the new tokens."""
    torch.manual_seed(seed)
    out = model.generate(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        do_sample=True,
        temperature=SAMPLE_TEMPERATURE,
        top_p=1.0,
        top_k=0,
        max_new_tokens=max_new_tokens,
    )  # [1, n + new]
    return tokenizer.decode(out[0, input_ids.shape[1] :], skip_special_tokens=True)


def sample_outputs(model, tokenizer, seed: int) -> list[tuple[str, str]]:
    """(prompt as shown, completion) for plain-text prompts and chat conversations.

    Plain prompts are continued as text; chat prompts go through `apply_chat_template` with
    `add_generation_prompt=True`, and the answer is what the model writes before <|im_end|>.
    """
    model.eval()
    samples = []
    for prompt in PLAIN_PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        samples.append((prompt, prompt + _generate(model, tokenizer, ids, PLAIN_NEW_TOKENS, seed)))
    for messages in CHAT_PROMPTS:
        ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
        shown = " / ".join(f"{m['role']}: {m['content']}" for m in messages)
        samples.append((f"chat: {shown}", _generate(model, tokenizer, ids, CHAT_NEW_TOKENS, seed).strip()))
    return samples


def write_plot(rows: list[dict], path: Path) -> bool:
    """Train and validation loss against step as an SVG; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    plt.rcParams["svg.hashsalt"] = "sluice-kjv-mini"
    steps = [int(r["step"]) for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, [float(r["train_loss"]) for r in rows], label="train (mean since last eval)")
    ax.plot(steps, [float(r["val_loss"]) for r in rows], label="validation (held-out chapters)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title("sluice-kjv-mini training loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    return True


def _versions() -> str:
    """The versions of the libraries a reproduction should match."""
    import tokenizers
    import transformers

    return f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write_readme(
    out: Path,
    settings: dict,
    rows: list[dict],
    samples: list[tuple[str, str]],
    n_params: int,
    corpus: dict,
    steps_done: int,
    wall_seconds: float,
    stopped_early: bool,
) -> None:
    """The model card: architecture, tokenizer, corpus and licence, training, loss, samples."""
    s = settings
    weights_mb = (out / "model.safetensors").stat().st_size / 1e6
    head_dim = s["hidden_size"] // s["num_heads"]
    final = rows[-1] if rows else None
    arch = _table(
        ["", ""],
        [
            ["architecture", "`LlamaForCausalLM` (transformers), RMSNorm, RoPE (theta 10000), SwiGLU MLP"],
            ["parameters", f"{n_params:,} (embedding tied with the LM head)"],
            ["hidden size", str(s["hidden_size"])],
            ["layers", str(s["num_layers"])],
            ["attention heads / KV heads", f"{s['num_heads']} / {s['num_kv_heads']} (grouped-query), head dim {head_dim}"],
            ["MLP intermediate size", str(s["intermediate_size"])],
            ["vocabulary", str(s["vocab_size"])],
            ["context length", str(s["context"])],
            ["weights", f"`model.safetensors`, float16, {weights_mb:.1f} MB"],
        ],
    )
    training = _table(
        ["setting", "value"],
        [
            ["steps", f"{steps_done} of {s['steps']}" + (" (stopped by the time budget)" if stopped_early else "")],
            ["batch", f"{s['batch_size']} sequences x {s['seq_len']} tokens = {s['batch_size'] * s['seq_len']} tokens/step"],
            ["tokens seen", f"{steps_done * s['batch_size'] * s['seq_len']:,} (about {steps_done * s['batch_size'] * s['seq_len'] / corpus['train_tokens']:.1f} epochs)"],
            ["optimizer", f"AdamW, betas (0.9, 0.95), weight decay {s['weight_decay']} on matrices, grad-norm clip {s['grad_clip']}"],
            ["learning rate", f"linear warm-up over {s['warmup_steps']} steps to {s['lr']}, cosine decay to {s['lr'] * s['min_lr_ratio']:.2g}"],
            ["precision", "float32 training, exported as float16"],
            ["hardware", f"CPU, `torch.set_num_threads({s['threads']})`, shared with other jobs"],
            ["wall time", f"{wall_seconds / 60:.1f} minutes"],
            ["seed", str(s["seed"])],
            ["software", _versions()],
        ],
    )
    loss_rows = [[r["step"], r["train_loss"], r["val_loss"], f"{float(r['lr']):.2e}", f"{float(r['elapsed_s']) / 60:.1f}"] for r in rows]
    loss_table = _table(["step", "train loss", "val loss", "lr", "minutes"], loss_rows)
    plot = "![training loss](loss.svg)\n\n" if (out / "loss.svg").exists() else ""
    sample_text = "\n\n".join(f"**{prompt}**\n\n```text\n{text}\n```" for prompt, text in samples)
    final_line = (
        f"Final loss (step {final['step']}): train {final['train_loss']}, validation {final['val_loss']} nats/token."
        if final
        else "No evaluation was logged."
    )
    text = f"""# sluice-kjv-mini

The bundled default model of sluice: what `sluice serve` loads when no `--model` is given. A tiny
Llama-architecture model trained from scratch on the King James Version of the Bible, so that a
fresh clone serves something that writes English with no network access. It knows the style of
its corpus and little else: it is a demonstration model, not an assistant.

Everything here was made by `scripts/train_default_model.py`; nothing was downloaded but the
Debian package with the text.

## Architecture

{arch}

## Tokenizer

Byte-level BPE trained with the `tokenizers` library on the training text, vocabulary
{s['vocab_size']}. Special tokens: `<|endoftext|>` = 0 (end of a document, also the pad token),
`<|im_start|>` = 1, `<|im_end|>` = 2. Every id decodes to a non-empty string. No BOS token is
added. `tokenizer_config.json` carries a ChatML chat template (system, user and assistant turns,
`add_generation_prompt` supported); `generation_config.json` lists both `<|endoftext|>` and
`<|im_end|>` as end-of-sequence ids.

## Corpus and licence

The King James Version (1611) as packaged by Debian in `{corpus['package']}` version
{corpus['version']}, read with the `bible` program of the `bible-kjv` package. The text is in the
public domain (the package's copyright file: "The copyright for the King James Version text of the
Bible is expired"). {corpus['chapters']} chapters, {corpus['verses']} verses.

Every {s['val_every_chapter']}th chapter is held out for validation ({corpus['val_chapters']} chapters;
{corpus['train_chapters']} train). Each chapter is one plain-prose document, one verse per line
without numbers. In addition, {s['chat_fraction']:.0%} of the verses are turned into ChatML
conversations: the user gives a reference ("John 3:16") or a verse's opening words, the assistant
answers with the verse; a third carry a system prompt and a fifth continue with the next verse.
Documents are shuffled and joined with `<|endoftext|>`: {corpus['train_tokens']:,} training tokens,
{corpus['val_tokens']:,} validation tokens. Training windows start at a document start half of the
time and anywhere otherwise.

## Training

{training}

{final_line}

## Loss curve

{plot}{loss_table}

The same numbers are in `loss.csv`.

## Samples

Sampled with transformers from this directory at temperature {SAMPLE_TEMPERATURE} (no top-k or
top-p), seed {s['seed']}; chat prompts go through `apply_chat_template(..., add_generation_prompt=True)`.

{sample_text}

## Limitations

With about four million parameters and under an hour of CPU, the model has learned the words,
spelling and cadence of the KJV and its common phrases, not their sense: sentences wander, it
sometimes coins a non-word, and it does not recall verses. Asked for a reference such as
"John 3:16" it answers with a verse-like line of its own; asked anything else, it answers in the
same voice. Use it to try sluice without a download, not for its answers.

## Reproduce

```sh
apt-get update && apt-get install -y bible-kjv-text bible-kjv
pip install torch transformers tokenizers safetensors numpy matplotlib
python3 scripts/train_default_model.py
```

The run is seeded and single-threaded, so it repeats step for step on the same software versions;
the wall time depends on the machine. Checkpoints go to `target/train-kjv-mini/` and
`--resume` continues an interrupted run.
"""
    (out / "README.md").write_text(text)
