"""Recomputes the word perplexity of the lm-eval perplexity task from sluice's own prompt
logprobs and checks it against what lm_eval reported.

Each document is scored as lm-eval's loglikelihood_rolling scores it when it fits one window: its
tokens after the tokenizer's prefix token (BOS, else EOS), every one of them scored. sluice
returns each prompt token's logprob for `/v1/completions` with echo + logprobs + max_tokens 0;
word perplexity is exp(-sum of logprobs / sum of words), words split on whitespace.
"""

import argparse
import json
import math
import re
import sys
import urllib.request

from transformers import AutoTokenizer


def post(url, body):
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--lm-eval-results", required=True)
    a = p.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(a.tokenizer)
    prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    total_logprob, total_words = 0.0, 0
    with open(a.data) as f:
        docs = [json.loads(line)["text"] for line in f]
    for doc in docs:
        ids = tokenizer.encode(doc, add_special_tokens=False)
        body = {"model": a.model, "prompt": [prefix] + ids, "echo": True, "logprobs": 0, "max_tokens": 0}
        logprobs = post(f"{a.base_url}/v1/completions", body)["choices"][0]["logprobs"]["token_logprobs"]
        assert logprobs[0] is None and len(logprobs) == len(ids) + 1
        total_logprob += sum(logprobs[1:])
        total_words += len(re.split(r"\s+", doc))
    own = math.exp(-total_logprob / total_words)
    with open(a.lm_eval_results) as f:
        results = json.load(f)["results"]
    reported = results["sluice_kjv_perplexity"]["word_perplexity,none"]
    accuracy = results["sluice_kjv_choice"]["acc,none"]
    print(f"lm_eval word_perplexity {reported:.6f}; sluice's own prompt logprobs give {own:.6f}")
    print(f"lm_eval sluice_kjv_choice acc {accuracy:.4f}; {len(docs)} perplexity documents, {total_words} words")
    if not math.isclose(reported, own, rel_tol=1e-9):
        sys.exit("the perplexities differ")


if __name__ == "__main__":
    main()
