#!/usr/bin/env python3
"""Writes random-weight Hugging Face model directories with the real shapes of SmolLM2-135M,
Qwen2.5-0.5B, Qwen3-0.6B and Gemma-3-1B, for benchmarking sluice against llama.cpp on identical
f16 weights.

    bench/python bench/make_random_model.py [OUT_DIR] [--models smollm2-135m,qwen2.5-0.5b] [--seed 0]
                                       [--check]

Each model lands in OUT_DIR/<name>/ (default bench/out/models/, git-ignored: never commit weights)
as config.json (transformers-4 layout: rope_theta, torch_dtype), model.safetensors (f16, tied
embeddings), tokenizer.json and tokenizer_config.json with a ChatML template.

The tokenizer is a small byte-level BPE trained on the docstrings of Python's standard library
(available offline), padded with filler tokens so that every id below the model's vocabulary size
decodes to visible text: a random model emits ids uniformly-ish over the whole vocabulary, and an id
that decodes to nothing would make streamed chunks and token counts disagree.

Weights are drawn with a scaled initialisation (1/sqrt(fan_in) for projections, output projections
further divided by sqrt(2 * layers), unit norms), so activations stay O(1) through every layer and
the next-token distribution is neither one-hot nor flat. `--check` loads each model with
transformers, checks every id decodes, the logits are finite and not one-hot, and sampled text varies.
"""
import argparse
import inspect
import json
import math
import os
import pkgutil
import sys
import warnings

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2  # ids of the special tokens above
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
TRAINED_VOCAB = 8192

# Shapes of the published checkpoints (their config.json files), random weights aside.
MODELS = {
    "smollm2-135m": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "hidden_act": "silu",
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "tie_word_embeddings": True,
        "vocab_size": 49152,
    },
    "qwen2.5-0.5b": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "max_window_layers": 24,
        "sliding_window": 32768,
        "use_sliding_window": False,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "attention_dropout": 0.0,
        "tie_word_embeddings": True,
        "vocab_size": 151936,
    },
    "qwen3-0.6b": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": True,
        "vocab_size": 151936,
    },
    # Gemma 3 1B: 22 sliding-window layers (512 positions) and 4 global ones (every 6th), one
    # KV head of 256, sandwich norms, GELU-tanh; norm weights are stored as offsets from one.
    "gemma3-1b": {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": 1152,
        "intermediate_size": 6912,
        "num_hidden_layers": 26,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": None,
        "query_pre_attn_scalar": 256,
        "sliding_window": 512,
        "sliding_window_pattern": 6,
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": True,
        "vocab_size": 262144,
    },
}


def corpus_lines():
    """Docstrings of the standard library's top-level modules and their public members."""
    skip = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo"}
    for info in sorted(pkgutil.iter_modules(), key=lambda m: m.name):
        name = info.name
        if name.startswith("_") or name in skip or name not in sys.stdlib_module_names:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated modules still have docstrings
                module = __import__(name)
        except Exception:  # some stdlib modules need optional system libraries
            continue
        docs = [inspect.getdoc(module)]
        for attr in dir(module):
            if not attr.startswith("_"):
                docs.append(inspect.getdoc(getattr(module, attr, None)))
        for doc in docs:
            if doc:
                yield doc


def filler_word(index):
    """A pronounceable pseudo-word, distinct for every index: consonant-vowel syllables."""
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    syllables = []
    while True:
        index, rest = divmod(index, len(consonants) * len(vowels))
        syllables.append(consonants[rest // len(vowels)] + vowels[rest % len(vowels)])
        if index == 0:
            return "".join(syllables)
        index -= 1


def build_tokenizer(vocab_size, special_tokens=SPECIAL_TOKENS):
    """A byte-level BPE whose vocabulary has exactly `vocab_size` ids, every one decodable; the
    special tokens take the first ids, in order."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=min(TRAINED_VOCAB, vocab_size),
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus_lines(), trainer=trainer)
    spec = json.loads(tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    # Fillers are ordinary vocabulary entries (a space, byte-level "Ġ", then a pseudo-word) that no
    # merge produces: encoding never emits them, decoding turns each into " word".
    index = 0
    while len(vocab) < vocab_size:
        token = "\u0120" + filler_word(index)
        index += 1
        if token not in vocab:
            vocab[token] = len(vocab)
    assert sorted(vocab.values()) == list(range(vocab_size))
    tokenizer = Tokenizer.from_str(json.dumps(spec))
    assert tokenizer.get_vocab_size() == vocab_size
    return tokenizer


def random_weights(config, generator):
    """Tensors named as in the Hugging Face checkpoint, f16, tied embeddings (no lm_head)."""
    import torch  # imported where used: make_large_gguf.py needs only the tokenizer
    hidden = config["hidden_size"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim", hidden // heads)
    inter, layers = config["intermediate_size"], config["num_hidden_layers"]
    qkv_bias = config["model_type"] == "qwen2"
    gemma = config["model_type"] == "gemma3_text"
    residual_scale = 1.0 / math.sqrt(2 * layers)

    def normal(shape, std):
        return (torch.randn(shape, generator=generator) * std).to(torch.float16)

    def linear(out_features, in_features, scale=1.0):
        # [out_features, in_features], as nn.Linear stores it
        return normal((out_features, in_features), scale / math.sqrt(in_features))

    def norm(width, scale=1.0):
        # Gemma stores `w` of `x̂ · (1 + w)`.
        value = scale - 1.0 if gemma else scale
        return torch.full((width,), value, dtype=torch.float16)

    tensors = {
        "model.embed_tokens.weight": normal((config["vocab_size"], hidden), 0.02),  # [vocab, hidden]
        "model.norm.weight": norm(hidden),  # [hidden]
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors[p + "input_layernorm.weight"] = norm(hidden)
        if gemma:
            # The sandwich: each sub-block's output is normed before it joins the residual;
            # scaled like the other models' output projections.
            tensors[p + "post_attention_layernorm.weight"] = norm(hidden, residual_scale)
            tensors[p + "pre_feedforward_layernorm.weight"] = norm(hidden)
            tensors[p + "post_feedforward_layernorm.weight"] = norm(hidden, residual_scale)
        else:
            tensors[p + "post_attention_layernorm.weight"] = norm(hidden)
        tensors[p + "self_attn.q_proj.weight"] = linear(heads * head_dim, hidden)
        tensors[p + "self_attn.k_proj.weight"] = linear(kv_heads * head_dim, hidden)
        tensors[p + "self_attn.v_proj.weight"] = linear(kv_heads * head_dim, hidden)
        tensors[p + "self_attn.o_proj.weight"] = linear(hidden, heads * head_dim, residual_scale)
        if config["model_type"] in ("qwen3", "gemma3_text"):
            tensors[p + "self_attn.q_norm.weight"] = norm(head_dim)
            tensors[p + "self_attn.k_norm.weight"] = norm(head_dim)
        if qkv_bias:
            tensors[p + "self_attn.q_proj.bias"] = normal((heads * head_dim,), 0.02)
            tensors[p + "self_attn.k_proj.bias"] = normal((kv_heads * head_dim,), 0.02)
            tensors[p + "self_attn.v_proj.bias"] = normal((kv_heads * head_dim,), 0.02)
        tensors[p + "mlp.gate_proj.weight"] = linear(inter, hidden)
        tensors[p + "mlp.up_proj.weight"] = linear(inter, hidden)
        tensors[p + "mlp.down_proj.weight"] = linear(hidden, inter, residual_scale)
    return tensors


def write_model(name, out_dir, seed):
    import torch
    from safetensors.torch import save_file

    shape = MODELS[name]
    target = os.path.join(out_dir, name)
    os.makedirs(target, exist_ok=True)
    config = dict(shape)
    config.update(
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        torch_dtype="float16",
        initializer_range=0.02,
        use_cache=True,
        transformers_version="4.46.0",
    )
    with open(os.path.join(target, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(target, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "do_sample": False}, f, indent=2)

    tokenizer = build_tokenizer(shape["vocab_size"])
    tokenizer.save(os.path.join(target, "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIAL_TOKENS[BOS_ID],
        "eos_token": SPECIAL_TOKENS[EOS_ID],
        "pad_token": SPECIAL_TOKENS[PAD_ID],
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": shape["max_position_embeddings"],
        "chat_template": CHATML_TEMPLATE,
        "added_tokens_decoder": {
            str(i): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                     "normalized": False, "single_word": False}
            for i, t in enumerate(SPECIAL_TOKENS)
        },
    }
    with open(os.path.join(target, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f, indent=2)

    generator = torch.Generator().manual_seed(seed)
    tensors = random_weights(shape, generator)
    save_file(tensors, os.path.join(target, "model.safetensors"), metadata={"format": "pt"})
    params = sum(t.numel() for t in tensors.values())
    print(f"{name}: {params / 1e6:.1f}M parameters (f16) -> {target}", file=sys.stderr)
    return target


def check_model(path):
    """Loads the directory with transformers and checks the tokenizer and a short greedy run."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    vocab_size = json.load(open(os.path.join(path, "config.json")))["vocab_size"]
    assert len(tokenizer) == vocab_size, (len(tokenizer), vocab_size)
    for token_id in range(len(SPECIAL_TOKENS), vocab_size, 997):
        assert tokenizer.decode([token_id]).strip(), f"id {token_id} decodes to nothing"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Tell me about the river."}],
        tokenize=False,
        add_generation_prompt=True,
    )
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    torch.manual_seed(0)
    with torch.no_grad():
        logits = model(ids).logits[0, -1]
        sampled = model.generate(ids, max_new_tokens=24, do_sample=True, temperature=1.0, top_k=0)
    new = sampled[0, ids.shape[1]:].tolist()
    probs = torch.softmax(logits, -1)
    assert torch.isfinite(logits).all(), "non-finite logits"
    assert probs.max() < 0.5, f"next-token distribution is nearly one-hot ({probs.max():.3f})"
    assert len(set(new)) > len(new) // 2, f"degenerate sampled output {new}"
    # Greedy decoding of a random network falls into repeating a token now and then; that costs
    # the same compute per token, so it does not matter to a throughput benchmark.
    print(
        f"check {os.path.basename(path)}: logits std {logits.std():.3f}, top prob {probs.max():.4f}, "
        f"sampled {len(set(new))} distinct of {len(new)}: {tokenizer.decode(new)[:80]!r}",
        file=sys.stderr,
    )


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", default=os.path.join(here, "out", "models"))
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="load each model and generate")
    args = parser.parse_args()
    for name in args.models.split(","):
        if name not in MODELS:
            parser.error(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
        path = write_model(name, args.out_dir, args.seed)
        if args.check:
            check_model(path)
        print(path)


if __name__ == "__main__":
    main()
