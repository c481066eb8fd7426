#!/usr/bin/env python3
"""Writes the tiny random-weight model fixtures under fixtures/models/ and their reference outputs.

Each fixture is a Hugging Face model directory (config.json, safetensors weights,
generation_config.json, tokenizer.json, tokenizer_config.json) plus reference.json holding the
prompt ids, the logits transformers computes for every prompt position, and a 32-token greedy
continuation. The Rust tests compare against these, so they need no Python.

Weights are rounded to the dtype they are saved in (f16/bf16) before the reference runs, and the
reference is computed in f32, so a loader that widens them exactly must match to ~1e-5.

Scoring references (scoring_reference.json in llama/ and qwen3/: final-norm hidden states, pooled
embeddings and prompt logprobs), the embedder fixture qwen3-embedder (sentence-transformers
modules.json with mean pooling) and the yes/no reranker fixture qwen3-reranker are computed from
the saved fixtures; `--scoring-only` rewrites just those, leaving the generation fixtures as they
are.

gemma3 is a Gemma 3 text model (Gemma3ForCausalLM) with sliding-window and global layers
interleaved (`sliding_window_pattern` 3, a window of 8 the prompt runs past), separate local and
global RoPE (the global one with linear scaling) and `query_pre_attn_scalar` unlike head_dim.
gemma3-p6 is the Gemma 3 a GGUF file can state (llama.cpp's `gemma3` has no pattern key by
default, no query_pre_attn_scalar, no per-type RoPE scaling): every 6th of 7 layers global,
`query_pre_attn_scalar` = head_dim, plain RoPE; make_gguf_fixtures.py converts it.

The mixture-of-experts fixtures (MOE_FIXTURES: qwen3-moe with a dense layer among sparse ones,
mixtral, olmoe, qwen2-moe with a shared expert) have 8 experts, 2 per token; transformers 5
keeps experts fused in memory but saves them per expert, as the hub's checkpoints are.

phi3 and phi4-mini are Phi3ForCausalLM models (fused qkv_proj and gate_up_proj) with `longrope`
RoPE: short factors up to `original_max_position_embeddings`, long factors past it, cos/sin scaled
by sqrt(1 + ln(max/original) / ln(original)). phi3 (multi-head, 4.x dialect)
has an original length of 32, above the 26-token prompt, so its prompt uses the short factors
and its greedy continuation crosses into the long ones; phi4-mini (grouped-query, tied, 5.x,
`partial_rotary_factor` 0.75: 12 of 16 head dimensions rotate) has 16, so its prompt already
uses the long factors. transformers picks the factors by the length of the sequence in the call
(`max(position_ids) + 1`), so their greedy references decode with the KV cache, as generation
does, rather than recomputing every step from scratch (which would re-rotate cached keys).

Usage: python3 scripts/make_fixtures.py [--scoring-only | --only NAME]
(CPU only, deterministic, seconds; `--only` rewrites one generation fixture.)
"""

import json
import math
import shutil
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    Gemma3TextConfig,
    GenerationConfig,
    DynamicCache,
    Phi3Config,
    LlamaConfig,
    MistralConfig,
    MixtralConfig,
    OlmoeConfig,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2MoeConfig,
    Qwen3Config,
    Qwen3MoeConfig,
)

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "models"
VOCAB_SIZE = 512
SPECIAL_TOKENS = ["<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
PROMPT = "The quick brown fox jumps over the lazy dog, and then it runs far away to the river."
CONTINUATION_TOKENS = 32
MIN_GREEDY_GAP = 0.01

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A small model runs on the CPU and writes one token at a time.",
    "Rivers run to the sea; the sea does not fill, and the rivers run again.",
    "In the beginning there was the byte, and the byte was merged into pairs.",
    "Paged attention keeps every sequence's keys and values in fixed-size blocks.",
    "Hello, world! How are you today? I am fine, thank you, and you?",
    "Numbers like 1, 2, 3, 42, 1000 and 3.14159 appear in text as well.",
    "def forward(self, x): return self.lm_head(self.norm(x))",
    "Large language models predict the next token from the ones before it.",
    "She sells sea shells by the sea shore, and the shells she sells are sea shells.",
]


def train_tokenizer() -> Tokenizer:
    """A byte-level BPE whose vocabulary is exactly VOCAB_SIZE ids, specials first."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=1,
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    # The corpus may run out of merges before VOCAB_SIZE: pad with unused added tokens so every
    # id the model can emit decodes.
    next_id = tok.get_vocab_size()
    while next_id < VOCAB_SIZE:
        tok.add_tokens([f"<|unused_{next_id}|>"])
        next_id += 1
    assert tok.get_vocab_size() == VOCAB_SIZE, tok.get_vocab_size()
    return tok


def base_dims(**over):
    dims = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=4,
    )
    dims.update(over)
    return dims


def scale_init(model: torch.nn.Module, seed: int, tied: bool) -> None:
    """Re-initialises weights so activations stay O(1) and logits spread over several units."""
    gen = torch.Generator().manual_seed(seed)
    # Gemma multiplies embeddings by sqrt(hidden): drawn as wide as the others', its tied
    # embedding makes every token predict one token forever.
    gemma = model.config.model_type.startswith("gemma")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:  # biases
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                # Tied embeddings double as the output head: keep them small enough that a token
                # does not simply predict itself forever.
                std = (0.5 if tied else 1.0) / (2.0 if gemma else 1.0)
                p.copy_(std * torch.randn(p.shape, generator=gen))
            elif "lm_head" in name:
                p.copy_(3.0 * torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
            else:
                # Fused experts are [experts, out, in]: scale by the input width.
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))


def round_weights(model: torch.nn.Module, dtype: torch.dtype) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(dtype).to(torch.float32))


def reference(model, prompt_ids):
    """All-position prompt logits and a greedy continuation, recomputed from scratch each step."""
    model.eval()
    with torch.no_grad():
        ids = torch.tensor([prompt_ids])
        prompt_logits = model(ids).logits[0]
        tokens = list(prompt_ids)
        greedy, min_gap = [], float("inf")
        for _ in range(CONTINUATION_TOKENS):
            last = model(torch.tensor([tokens])).logits[0, -1]
            top2 = torch.topk(last, 2).values
            min_gap = min(min_gap, float(top2[0] - top2[1]))
            nxt = int(torch.argmax(last))
            greedy.append(nxt)
            tokens.append(nxt)
    return prompt_logits, greedy, min_gap


def reference_cached(model, prompt_ids):
    """Like `reference`, but the continuation is decoded one token at a time with the KV cache, as
    `generate` does: `longrope` picks its factors by the length seen in each call."""
    model.eval()
    with torch.no_grad():
        prompt_logits = model(torch.tensor([prompt_ids])).logits[0]
        cache = DynamicCache(config=model.config)
        last = model(torch.tensor([prompt_ids]), past_key_values=cache, use_cache=True).logits[0, -1]
        greedy, min_gap = [], float("inf")
        for _ in range(CONTINUATION_TOKENS):
            top2 = torch.topk(last, 2).values
            min_gap = min(min_gap, float(top2[0] - top2[1]))
            nxt = int(torch.argmax(last))
            greedy.append(nxt)
            last = model(torch.tensor([[nxt]]), past_key_values=cache, use_cache=True).logits[0, -1]
    return prompt_logits, greedy, min_gap


def phi3_4x_dialect(config_path: Path) -> None:
    """Phi-3's published 4.x configs: `rope_scaling` {"type": "longrope", short/long factors}, the
    original length at top level. (Early revisions said "su"; transformers 5 cannot load that
    without the original length inside `rope_scaling`, so llama.cpp's converter cannot either.)"""
    cfg = json.loads(config_path.read_text())
    scaling = cfg["rope_scaling"]
    cfg["rope_scaling"] = dict(
        type="longrope", short_factor=scaling["short_factor"], long_factor=scaling["long_factor"]
    )
    config_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def to_4x_dialect(config_path: Path) -> None:
    """Rewrites a transformers-5 config.json the way transformers 4.x published configs."""
    cfg = json.loads(config_path.read_text())
    params = cfg.pop("rope_parameters", None) or {}
    cfg["rope_theta"] = params.pop("rope_theta", 10000.0)
    rope_type = params.get("rope_type", "default")
    cfg["rope_scaling"] = None if rope_type == "default" else params
    cfg["torch_dtype"] = cfg.pop("dtype", "float32")
    if cfg.get("model_type") in ("qwen2_moe", "qwen3_moe") and "num_local_experts" in cfg:
        cfg["num_experts"] = cfg.pop("num_local_experts")
    cfg["transformers_version"] = "4.46.0"
    config_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def inline_chat_template(out: Path) -> None:
    """transformers 4.x kept the chat template inside tokenizer_config.json, not a .jinja file."""
    template_file = out / "chat_template.jinja"
    config_path = out / "tokenizer_config.json"
    cfg = json.loads(config_path.read_text())
    cfg["chat_template"] = template_file.read_text()
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(cfg, indent=2) + "\n")
    template_file.unlink()


FIXTURES = [
    # name, config class, config overrides, saved dtype, dialect, shard size
    ("llama", LlamaConfig, dict(tie_word_embeddings=True), torch.float32, "5.x", None),
    (
        "llama3-rope-scaling",
        LlamaConfig,
        dict(
            tie_word_embeddings=False,
            head_dim=16,
            rope_parameters=dict(
                rope_type="llama3",
                rope_theta=500000.0,
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=32,
            ),
        ),
        torch.float32,
        "4.x",
        None,
    ),
    (
        "llama-odd-head-dim",
        LlamaConfig,
        dict(tie_word_embeddings=False, head_dim=24, num_attention_heads=4, num_key_value_heads=2),
        torch.float16,
        "5.x",
        None,
    ),
    ("mistral", MistralConfig, dict(tie_word_embeddings=False, sliding_window=8), torch.float32, "5.x", None),
    ("qwen2", Qwen2Config, dict(tie_word_embeddings=False), torch.float32, "4.x", "150KB"),
    ("qwen3", Qwen3Config, dict(tie_word_embeddings=True, head_dim=32), torch.bfloat16, "5.x", None),
    (
        "gemma3",
        Gemma3TextConfig,
        dict(
            tie_word_embeddings=True,
            num_hidden_layers=6,
            head_dim=16,
            sliding_window=8,
            sliding_window_pattern=3,
            query_pre_attn_scalar=24,
            rope_parameters=dict(
                full_attention=dict(rope_type="linear", rope_theta=1_000_000.0, factor=8.0),
                sliding_attention=dict(rope_type="default", rope_theta=10_000.0),
            ),
        ),
        torch.float32,
        "5.x",
        None,
    ),
    (
        "phi3",
        Phi3Config,
        dict(
            tie_word_embeddings=False,
            num_key_value_heads=4,
            original_max_position_embeddings=32,
            rope_parameters=dict(
                rope_type="longrope",
                rope_theta=10000.0,
                short_factor=[1.0 + 0.05 * i for i in range(8)],
                long_factor=[1.0 + 0.9 * i for i in range(8)],
            ),
        ),
        torch.float32,
        "4.x",
        None,
    ),
    (
        "phi4-mini",
        Phi3Config,
        dict(
            tie_word_embeddings=True,
            original_max_position_embeddings=16,
            partial_rotary_factor=0.75,
            rope_parameters=dict(
                rope_type="longrope",
                rope_theta=10000.0,
                partial_rotary_factor=0.75,
                short_factor=[1.0 + 0.1 * i for i in range(6)],
                long_factor=[1.5 + 1.5 * i for i in range(6)],
            ),
        ),
        torch.float32,
        "5.x",
        None,
    ),
    # Gemma 3 as GGUF can state it: every 6th layer global, scores scaled by head_dim^-1/2, no
    # RoPE scaling (make_gguf_fixtures.py converts it; `gemma3` keeps the other choices).
    (
        "gemma3-p6",
        Gemma3TextConfig,
        dict(
            tie_word_embeddings=True,
            num_hidden_layers=7,
            head_dim=16,
            sliding_window=8,
            sliding_window_pattern=6,
            query_pre_attn_scalar=16,
            rope_parameters=dict(
                full_attention=dict(rope_type="default", rope_theta=1_000_000.0),
                sliding_attention=dict(rope_type="default", rope_theta=10_000.0),
            ),
        ),
        torch.float32,
        "5.x",
        None,
    ),
]


# Each MoE fixture: 8 experts, 2 per token (seeded apart from FIXTURES so either list can grow).
MOE = dict(num_experts_per_tok=2)
MOE_FIXTURES = [
    (
        "qwen3-moe",
        Qwen3MoeConfig,
        dict(
            MOE,
            num_experts=8,
            num_hidden_layers=3,
            head_dim=16,
            moe_intermediate_size=32,
            norm_topk_prob=True,
            mlp_only_layers=[1],
            tie_word_embeddings=False,
        ),
        torch.bfloat16,
        "4.x",
        None,
    ),
    (
        "mixtral",
        MixtralConfig,
        dict(MOE, num_local_experts=8, intermediate_size=48, tie_word_embeddings=False),
        torch.float32,
        "5.x",
        None,
    ),
    (
        "olmoe",
        OlmoeConfig,
        dict(MOE, num_experts=8, intermediate_size=32, norm_topk_prob=False, tie_word_embeddings=False),
        torch.float32,
        "4.x",
        None,
    ),
    (
        "qwen2-moe",
        Qwen2MoeConfig,
        dict(
            MOE,
            num_experts=8,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=64,
            norm_topk_prob=False,
            tie_word_embeddings=False,
        ),
        torch.float32,
        "5.x",
        None,
    ),
]
MOE_SEED = 3000


def write_fixture(name, config_cls, over, dtype, dialect, shard, tokenizer, seed):
    out = ROOT / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    config = config_cls(**base_dims(**over))
    prompt_ids = [0] + tokenizer.encode(PROMPT).ids
    # Draw weights until greedy decoding is unambiguous (every step's top two logits at least
    # MIN_GREEDY_GAP apart) and not a single repeated token.
    for attempt in range(20):
        torch.manual_seed(seed + attempt)
        model = AutoModelForCausalLM.from_config(
            config, dtype=torch.float32, attn_implementation="eager"
        )
        scale_init(model, seed + attempt, config.tie_word_embeddings)
        if config.tie_word_embeddings:
            model.tie_weights()
        round_weights(model, dtype)
        longrope = config.rope_parameters.get("rope_type") == "longrope"
        logits, greedy, gap = (reference_cached if longrope else reference)(model, prompt_ids)
        if gap > MIN_GREEDY_GAP and len(set(greedy)) >= 2:
            break
    else:
        raise RuntimeError(f"{name}: no seed gave an unambiguous greedy continuation")

    save_kwargs = {"max_shard_size": shard} if shard else {}
    model.to(dtype).save_pretrained(out, **save_kwargs)
    GenerationConfig(bos_token_id=0, eos_token_id=[1, 3], pad_token_id=4).save_pretrained(out)
    if dialect == "4.x":
        to_4x_dialect(out / "config.json")
        if name.startswith("phi3"):
            phi3_4x_dialect(out / "config.json")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|bos|>",
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        additional_special_tokens=["<|eos|>", "<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    if dialect == "4.x":
        inline_chat_template(out)
    ref = {
        "prompt": PROMPT,
        "prompt_ids": prompt_ids,
        "prompt_logits": [[round(float(x), 6) for x in row] for row in logits],
        "greedy_tokens": greedy,
        "min_greedy_gap": gap,
        "saved_dtype": str(dtype).removeprefix("torch."),
        "config_dialect": dialect,
    }
    (out / "reference.json").write_text(json.dumps(ref) + "\n")
    print(f"{name}: {len(prompt_ids)} prompt tokens, greedy gap {gap:.3f}, tokens {greedy[:8]}...")


EMBED_INPUTS = ["The quick brown fox jumps.", "Rivers run to the sea; the sea does not fill."]
RERANK_QUERY = "Where do rivers run?"
RERANK_DOCUMENTS = ["Rivers run to the sea.", "The quick brown fox jumps over the lazy dog."]
RERANK_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
RERANK_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
RERANK_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"


def rounded(t):
    return [round(float(x), 7) for x in t]


def final_hidden_states(model, ids):
    """The final-norm hidden state of every position (the output head's input), in f32."""
    model.eval()
    with torch.no_grad():
        return model.model(torch.tensor([ids])).last_hidden_state[0].float()


def pooled(states, mode):
    """Sentence-transformers pooling of `states: [T, hidden]`, then L2 normalisation."""
    v = {"mean": states.mean(0), "cls": states[0], "lasttoken": states[-1]}[mode]
    return torch.nn.functional.normalize(v, p=2, dim=-1)


def write_scoring_reference(name):
    """Hidden states, pooled embeddings and prompt logprobs of the fixture's reference prompt."""
    out = ROOT / name
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    ids = json.loads((out / "reference.json").read_text())["prompt_ids"]
    states = final_hidden_states(model, ids)
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)
    ref = {
        "prompt_ids": ids,
        "hidden_states": [rounded(row) for row in states],
        "pooled": {mode: rounded(pooled(states, mode)) for mode in ("mean", "cls", "lasttoken")},
        # Entry i: log p(prompt[i + 1] | prompt[..= i]).
        "prompt_logprobs": [round(float(logprobs[i, ids[i + 1]]), 7) for i in range(len(ids) - 1)],
    }
    (out / "scoring_reference.json").write_text(json.dumps(ref) + "\n")
    print(f"{name}: scoring reference over {len(ids)} tokens")


def write_embedder_fixture():
    """qwen3's weights and tokenizer with sentence-transformers files asking for mean pooling."""
    src, out = ROOT / "qwen3", ROOT / "qwen3-embedder"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    for f in src.iterdir():
        if f.name not in ("reference.json", "scoring_reference.json"):
            shutil.copy(f, out / f.name)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (out / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
    (out / "1_Pooling").mkdir()
    pooling = {
        "word_embedding_dimension": 64,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False,
        "include_prompt": True,
    }
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2) + "\n")
    (out / "2_Normalize").mkdir()
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    tokenizer = Tokenizer.from_file(str(out / "tokenizer.json"))
    inputs = []
    for text in EMBED_INPUTS:
        ids = tokenizer.encode(text).ids
        inputs.append({"text": text, "ids": ids, "embedding": rounded(pooled(final_hidden_states(model, ids), "mean"))})
    (out / "embedding_reference.json").write_text(json.dumps({"pooling": "mean", "inputs": inputs}) + "\n")
    print(f"qwen3-embedder: {len(inputs)} reference embeddings")


def write_reranker_fixture(seed=2000):
    """A Qwen3 model whose tokenizer has single "yes" and "no" tokens, as Qwen3-Reranker's has,
    and the reference relevance of each document: p(yes) / (p(yes) + p(no)) after the prompt."""
    out = ROOT / "qwen3-reranker"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    tokenizer = Tokenizer.from_file(str(ROOT / "qwen3" / "tokenizer.json"))
    tokenizer.add_tokens(["yes", "no"])
    config = Qwen3Config(**base_dims(vocab_size=VOCAB_SIZE + 2, tie_word_embeddings=True, head_dim=32))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
    scale_init(model, seed, tied=True)
    model.tie_weights()
    model.save_pretrained(out)
    GenerationConfig(bos_token_id=0, eos_token_id=[1, 3], pad_token_id=4).save_pretrained(out)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|bos|>",
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        additional_special_tokens=["<|eos|>", "<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    yes, no = tokenizer.token_to_id("yes"), tokenizer.token_to_id("no")
    model.eval()
    pairs = []
    for doc in RERANK_DOCUMENTS:
        text = f"{RERANK_PREFIX}<Instruct>: {RERANK_INSTRUCTION}\n<Query>: {RERANK_QUERY}\n<Document>: {doc}{RERANK_SUFFIX}"
        ids = tokenizer.encode(text).ids
        with torch.no_grad():
            last = model(torch.tensor([ids])).logits[0, -1].double()
        two = torch.log_softmax(torch.stack([last[no], last[yes]]), dim=0)
        pairs.append({"document": doc, "prompt_ids": ids, "relevance": float(two[1].exp())})
    ref = {"query": RERANK_QUERY, "yes": yes, "no": no, "results": pairs}
    (out / "rerank_reference.json").write_text(json.dumps(ref) + "\n")
    print(f"qwen3-reranker: relevance {[round(p['relevance'], 4) for p in pairs]}")


def write_scoring_fixtures():
    for name in ("llama", "qwen3"):
        write_scoring_reference(name)
    write_embedder_fixture()
    write_reranker_fixture()


def main():
    args = sys.argv[1:]
    if "--only" in args:
        only = args[args.index("--only") + 1]
        tokenizer = train_tokenizer()
        for i, fixture in enumerate(FIXTURES):
            if fixture[0] == only:
                write_fixture(*fixture, tokenizer=tokenizer, seed=1000 + i)
        for i, fixture in enumerate(MOE_FIXTURES):
            if fixture[0] == only:
                write_fixture(*fixture, tokenizer=tokenizer, seed=MOE_SEED + i)
        return
    if "--scoring-only" not in args:
        tokenizer = train_tokenizer()
        for i, fixture in enumerate(FIXTURES):
            write_fixture(*fixture, tokenizer=tokenizer, seed=1000 + i)
        for i, fixture in enumerate(MOE_FIXTURES):
            write_fixture(*fixture, tokenizer=tokenizer, seed=MOE_SEED + i)
    write_scoring_fixtures()


if __name__ == "__main__":
    main()
