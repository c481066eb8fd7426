"""KV events as a router sees them: a real `sluice serve --kv-events` and a ZMQ subscriber
(pyzmq) decoding with msgspec structs written from vLLM's published schema
(`vllm/distributed/kv_events.py`): the array-like structs of vLLM up to 0.23 (sluice's default)
and the map-encoded ones of later vLLM (`--kv-events-encoding map`).

What is checked: every message decodes; the token ids of `BlockStored` events, followed along
parent links, are the prompts sent; `BlockRemoved` arrives only for blocks stored before; the
index a subscriber builds from the events alone predicts the cached tokens the server reports
for each prompt; the replay socket returns the same batches; a shutdown sends
`AllBlocksCleared`; a subscriber that never reads does not stop the server; a taken port is a
clear error."""

import json
import subprocess
import time
import urllib.request
from typing import Any

import msgspec
import pytest
import zmq

from sluice_server import MODEL_DIR, ROOT, free_port, serve

BLOCK = 16


# --- vLLM <= 0.23: array_like structs, tag first ------------------------------------------
class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(KVCacheEvent):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[Any] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[int]
    medium: str | None
    group_idx: int | None = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


# --- vLLM since PR 42892: each event a map with its tag under "type" -------------------------
class MapEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class MapBlockStored(MapEvent, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[Any] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class MapBlockRemoved(MapEvent, tag="BlockRemoved"):
    block_hashes: list[int]
    medium: str | None
    group_idx: int | None = None


class MapAllBlocksCleared(MapEvent, tag="AllBlocksCleared"):
    pass


class MapKVEventBatch(EventBatch):
    events: list[MapBlockStored | MapBlockRemoved | MapAllBlocksCleared]


def kind(event) -> str:
    return type(event).__name__.removeprefix("Map")


class Subscriber:
    """A SUB socket and the index a router keeps from the events alone: per medium, each live
    block's parent and tokens."""

    def __init__(self, endpoint: str, topic: bytes, decoder: msgspec.msgpack.Decoder):
        self.ctx = zmq.Context.instance()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.connect(endpoint)
        self.sub.setsockopt(zmq.SUBSCRIBE, topic)
        self.topic = topic
        self.decoder = decoder
        self.messages: list[tuple[int, bytes]] = []
        self.live: dict[str, dict[int, tuple[int | None, tuple[int, ...]]]] = {"CPU": {}, "DISK": {}}
        self.stored_tokens: dict[int, tuple[int | None, tuple[int, ...]]] = {}
        self.cleared = 0

    def drain(self, quiet: float = 0.4, timeout: float = 20.0) -> None:
        """Receives until nothing arrives for `quiet` seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline and self.sub.poll(int(quiet * 1000)):
            topic, seq, payload = self.sub.recv_multipart()
            assert topic == self.topic
            seq = int.from_bytes(seq, "big")
            if self.messages:
                assert seq == self.messages[-1][0] + 1, "sequence numbers count up without gaps"
            self.messages.append((seq, payload))
            self.apply(self.decoder.decode(payload))

    def apply(self, batch) -> None:
        assert batch.data_parallel_rank == 0
        for event in batch.events:
            if kind(event) == "BlockStored":
                assert event.block_size == BLOCK and event.group_idx == 0
                assert event.kv_cache_spec_kind == "full_attention"
                assert len(event.token_ids) == BLOCK * len(event.block_hashes)
                parent = event.parent_block_hash
                for i, h in enumerate(event.block_hashes):
                    tokens = tuple(event.token_ids[i * BLOCK:(i + 1) * BLOCK])
                    assert h not in self.live[event.medium], "stored twice without a removal"
                    self.live[event.medium][h] = (parent, tokens)
                    self.stored_tokens[h] = (parent, tokens)
                    parent = h
            elif kind(event) == "BlockRemoved":
                for h in event.block_hashes:
                    assert h in self.live[event.medium], "removed a block never stored"
                    del self.live[event.medium][h]
            else:
                self.cleared += 1
                self.live = {"CPU": {}, "DISK": {}}

    def chain(self, last: int) -> list[int]:
        tokens: list[int] = []
        at: int | None = last
        while at is not None:
            parent, block = self.stored_tokens[at]
            tokens[:0] = block
            at = parent
        return tokens

    def predicted_hit(self, prompt: list[int]) -> int:
        """Tokens of `prompt` this replica holds, by the events alone (either tier)."""
        parent = None
        hit = 0
        # The last token is always computed, so a prompt reuses at most its full blocks
        # before it.
        for i in range((len(prompt) - 1) // BLOCK):
            block = tuple(prompt[i * BLOCK:(i + 1) * BLOCK])
            found = [h for tier in self.live.values() for h, (p, t) in tier.items()
                     if p == parent and t == block]
            if not found:
                break
            parent = found[0]
            hit += BLOCK
        return hit


def complete(base: str, prompt: list[int]) -> dict:
    body = json.dumps({"model": "llama", "prompt": prompt, "max_tokens": 1,
                       "temperature": 0}).encode()
    req = urllib.request.Request(base + "/v1/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def prompts() -> list[list[int]]:
    """Twelve prompts of 100 tokens over 5 shared 48-token prefixes."""
    out = []
    for i in range(12):
        shared = [(7 * j + 13 * (i % 5)) % 500 + 3 for j in range(48)]
        own = [(11 * j + 17 * i) % 500 + 3 for j in range(52)]
        out.append(shared + own)
    return out


@pytest.mark.parametrize("encoding", ["array", "map"])
def test_a_subscriber_rebuilds_the_prompts_and_predicts_the_cache(tmp_path, encoding):
    port, replay_port = free_port(), free_port()
    decoder = msgspec.msgpack.Decoder(KVEventBatch if encoding == "array" else MapKVEventBatch)
    args = ["--kv-events", f"tcp://127.0.0.1:{port}",
            "--kv-events-replay", f"tcp://127.0.0.1:{replay_port}",
            "--kv-events-pod", "pod-1", "--kv-events-encoding", encoding,
            # A small pool (a few prompts' worth) so that blocks are evicted, and a disk tier.
            "--kv-cache-memory", "0.0003", "--kv-disk-cache", str(tmp_path / "kv"),
            "--block-size", str(BLOCK)]
    with serve(*args) as base:
        sub = Subscriber(f"tcp://127.0.0.1:{port}", b"kv@pod-1@llama", decoder)
        # A subscriber that connects and never reads.
        idle = zmq.Context.instance().socket(zmq.SUB)
        idle.connect(f"tcp://127.0.0.1:{port}")
        idle.setsockopt(zmq.SUBSCRIBE, b"")
        time.sleep(0.5)  # ZMQ subscriptions propagate asynchronously
        sent = prompts()
        checked = 0
        for prompt in sent + sent[:6]:
            sub.drain()
            expected = sub.predicted_hit(prompt)
            got = complete(base, prompt)["usage"].get("prompt_tokens_details") or {}
            assert got.get("cached_tokens", 0) == expected, (prompt[:4], got, expected)
            checked += expected > 0
        sub.drain()
        assert checked >= 3, "some prompts were predicted to hit, and did"
        # Every prompt is a chain of stored blocks: its full blocks, parent to child.
        for prompt in sent:
            full = len(prompt) // BLOCK * BLOCK
            chains = [sub.chain(h) for h in sub.stored_tokens]
            assert prompt[:full] in chains
        kinds = {kind(e) for _, p in sub.messages for e in decoder.decode(p).events}
        assert {"BlockStored", "BlockRemoved"} <= kinds, kinds
        media = {e.medium for _, p in sub.messages for e in decoder.decode(p).events
                 if kind(e) == "BlockStored"}
        assert media == {"CPU", "DISK"}

        # The replay socket returns the same batches, then -1 and an empty frame.
        dealer = zmq.Context.instance().socket(zmq.DEALER)
        dealer.connect(f"tcp://127.0.0.1:{replay_port}")
        dealer.send_multipart([b"", (0).to_bytes(8, "big")])
        replayed = []
        while True:
            assert dealer.poll(10_000), "replay answered"
            empty, seq, payload = dealer.recv_multipart()
            seq = int.from_bytes(seq, "big", signed=True)
            if seq == -1:
                assert payload == b""
                break
            replayed.append((seq, payload))
        assert replayed == sub.messages
        # A malformed request gets the end marker alone.
        dealer.send_multipart([b"", b"short"])
        assert dealer.poll(10_000)
        assert dealer.recv_multipart()[1] == (-1).to_bytes(8, "big", signed=True)

        metrics = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
        assert 'sluice:kv_events_total{model_name="llama"}' in metrics
        assert 'sluice:kv_events_dropped_total{model_name="llama"} 0' in metrics
        idle.close(linger=0)

        # Unloading the model clears its topic; the next request loads it again and the same
        # topic goes on from the next sequence number.
        unload = urllib.request.Request(base + "/admin/models/llama/unload", b"{}",
                                        {"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(unload, timeout=60).read()
        sub.drain(quiet=1.0)
        assert sub.cleared == 1 and sub.live == {"CPU": {}, "DISK": {}}
        complete(base, sent[0])
        sub.drain()
        assert sub.live["CPU"], "the reloaded model publishes again"
    # `serve` stopped the server: its engine's pool is gone, and said so before the exit.
    sub.drain(quiet=1.0)
    assert sub.cleared == 2 and sub.live == {"CPU": {}, "DISK": {}}


def test_a_taken_port_is_a_clear_error():
    with zmq.Context.instance().socket(zmq.PUB) as taken:
        port = taken.bind_to_random_port("tcp://127.0.0.1")
        binary = ROOT / "target" / "debug" / "sluice"
        import os
        binary = os.environ.get("SLUICE_BIN", str(binary))
        proc = subprocess.run(
            [binary, "serve", "--model", str(MODEL_DIR), "--port", "0",
             "--kv-events", f"tcp://127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0
        assert f"--kv-events tcp://127.0.0.1:{port}: cannot bind" in proc.stderr, proc.stderr
