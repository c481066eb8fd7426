#!/usr/bin/env python3
"""Which replica holds which prefix, from the KV events alone (issue 28).

A small subscriber in the spirit of a prefix-aware router's KV index: one ZMQ SUB socket per
replica (`sluice serve --kv-events ENDPOINT`, vLLM's wire format: frames [topic `kv@<pod>@<model>`,
8-byte big-endian sequence number, msgpack `[ts, events, dp_rank]`], events as tagged arrays or
tagged maps), subscribed to the topic prefix `kv@`, and per replica:

- the live blocks, per medium (`CPU` memory pool, `DISK` disk tier): block hash -> (parent hash,
  the block's token ids), so a prompt's cached prefix is found by walking its full blocks from
  the root (`BlockStored` adds, `BlockRemoved` takes away, `AllBlocksCleared` empties);
- the history of each block (the times it became live and stopped being live, from the batches'
  timestamps), so "who held how much of this prompt at time T" and "who stored this block
  first" can be asked after the fact;
- the sequence numbers per topic: a gap is filled from the replay socket
  (`--kv-events-replay`) where one is given, else counted as lost (the index may then be wrong);
  a sequence that starts again from a smaller number is a restarted replica (its index is cleared).

Blocks of KV group 0 are indexed (every group of a full-attention model); other groups are
counted and ignored.

Used by bench/router_bench.py --kv-index; on its own:

    bench/out/venv/bin/python bench/kv_index.py --replicas "http://127.0.0.1:18101 ..." \\
        --events "tcp://127.0.0.1:18201 ..." [--replay "tcp://127.0.0.1:18301 ..."] \\
        --seconds 30 [--prompt "a user message"]

Needs pyzmq and msgspec.
"""
import argparse
import json
import sys
import threading
import time
import urllib.request

import msgspec
import zmq

TOPIC_PREFIX = b"kv@"
END_SEQ = -1


def decode_event(raw):
    """An event as (tag, fields): array form `[tag, f1, ...]` or map form `{"type": tag, ...}`."""
    if isinstance(raw, dict):
        return raw.get("type"), raw
    tag = raw[0]
    names = {
        "BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
                        "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind",
                        "kv_cache_spec_sliding_window"),
        "BlockRemoved": ("block_hashes", "medium", "group_idx"),
    }.get(tag, ())
    return tag, dict(zip(names, raw[1:]))


class ReplicaIndex:
    """What one replica holds, by its events."""

    def __init__(self, name):
        self.name = name
        self.block_size = None
        # medium -> hash -> (parent, tokens)
        self.blocks = {}
        # (parent, tokens) -> {hash: number of media holding it}
        self.by_key = {}
        # (parent, tokens) -> [[t_live, t_gone or None], ...] (any medium)
        self.history = {}
        self.stats = {"messages": 0, "batches_replayed": 0, "events": 0, "stored_blocks": 0,
                      "removed_blocks": 0, "cleared": 0, "gaps": 0, "lost_batches": 0,
                      "restarts": 0, "other_groups": 0, "unknown_removals": 0, "lora_or_extra": 0}
        self.expected = {}  # topic -> next sequence number
        self.gone_hash = {}  # (parent, tokens) -> its hash when last live, for history walks
        self.caught_up_to = None  # next sequence number after a start-up replay

    # ---- applying events

    def _key_live(self, key, h, ts):
        hashes = self.by_key.setdefault(key, {})
        was_live = bool(hashes)
        hashes[h] = hashes.get(h, 0) + 1
        if not was_live:
            self.history.setdefault(key, []).append([ts, None])

    def _key_gone(self, key, h, ts):
        self.gone_hash[key] = h
        hashes = self.by_key.get(key)
        if not hashes or h not in hashes:
            return
        hashes[h] -= 1
        if hashes[h] <= 0:
            del hashes[h]
        if not hashes:
            del self.by_key[key]
            spans = self.history.get(key)
            if spans and spans[-1][1] is None:
                spans[-1][1] = ts

    def clear(self, ts):
        for key, hashes in self.by_key.items():
            self.gone_hash[key] = next(iter(hashes))
            spans = self.history.get(key)
            if spans and spans[-1][1] is None:
                spans[-1][1] = ts
        self.blocks = {}
        self.by_key = {}

    def apply_batch(self, batch):
        ts, events = batch[0], batch[1]
        for raw in events:
            self.stats["events"] += 1
            tag, e = decode_event(raw)
            if tag == "BlockStored":
                if (e.get("group_idx") or 0) != 0:
                    self.stats["other_groups"] += 1
                    continue
                if e.get("lora_id") is not None or e.get("extra_keys"):
                    self.stats["lora_or_extra"] += 1
                bs = e["block_size"]
                self.block_size = self.block_size or bs
                tier = self.blocks.setdefault(e.get("medium") or "CPU", {})
                parent = e.get("parent_block_hash")
                tokens = e["token_ids"]
                for i, h in enumerate(e["block_hashes"]):
                    key = (parent, tuple(tokens[i * bs:(i + 1) * bs]))
                    if h in tier:  # stored again without a removal: replace
                        self._key_gone(tier[h], h, ts)
                    tier[h] = key
                    self._key_live(key, h, ts)
                    self.stats["stored_blocks"] += 1
                    parent = h
            elif tag == "BlockRemoved":
                if (e.get("group_idx") or 0) != 0:
                    self.stats["other_groups"] += 1
                    continue
                tier = self.blocks.get(e.get("medium") or "CPU", {})
                for h in e["block_hashes"]:
                    key = tier.pop(h, None)
                    if key is None:
                        self.stats["unknown_removals"] += 1
                        continue
                    self._key_gone(key, h, ts)
                    self.stats["removed_blocks"] += 1
            elif tag == "AllBlocksCleared":
                self.stats["cleared"] += 1
                self.clear(ts)

    # ---- questions

    def _walk(self, prompt, live_at=None):
        """Full blocks of `prompt` found from the root: live now, or live at time `live_at`."""
        bs = self.block_size
        if not bs:
            return 0
        parent = None
        n = 0
        for i in range(len(prompt) // bs):
            key = (parent, tuple(prompt[i * bs:(i + 1) * bs]))
            if live_at is None:
                hashes = self.by_key.get(key)
                if not hashes:
                    break
                parent = next(iter(hashes))
            else:
                spans = self.history.get(key)
                if not spans or not any(a <= live_at and (b is None or b > live_at) for a, b in spans):
                    break
                # The hash of a (parent, tokens) pair is the same every time it is stored.
                parent = self._hash_of(key)
                if parent is None:
                    break
            n += 1
        return n

    def _hash_of(self, key):
        hashes = self.by_key.get(key)
        if hashes:
            return next(iter(hashes))
        return self.gone_hash.get(key)

    def cached_tokens(self, prompt, live_at=None):
        """Tokens of `prompt` a request would find cached here: its full blocks found, but never
        the last token (a prompt reuses at most the full blocks before its last token)."""
        if not self.block_size:
            return 0
        bs = self.block_size
        return min(self._walk(prompt, live_at), (len(prompt) - 1) // bs) * bs

    def first_stored(self, prompt):
        """When the last full block of `prompt` (this exact prefix) first became live here."""
        bs = self.block_size
        if not bs or len(prompt) < bs:
            return None
        parent = None
        n = len(prompt) // bs
        for i in range(n):
            key = (parent, tuple(prompt[i * bs:(i + 1) * bs]))
            parent = self._hash_of(key)
            if parent is None:
                return None
        spans = self.history.get(key)
        return spans[0][0] if spans else None


class KvIndex:
    """Every replica's index, fed by one thread polling every replica's SUB socket."""

    def __init__(self, replicas, events, replay=None, log=None):
        if len(events) != len(replicas):
            raise ValueError("one events endpoint per replica")
        self.replicas = list(replicas)
        self.endpoints = dict(zip(replicas, events))
        self.replay = dict(zip(replicas, replay)) if replay else {}
        self.index = {r: ReplicaIndex(r) for r in replicas}
        self.lock = threading.Lock()
        self.last_rx = time.monotonic()
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.log = log or (lambda m: print(m, file=sys.stderr, flush=True))
        self.ctx = zmq.Context()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self, wait_s=1.0):
        self.thread.start()
        self.ready.wait(10)
        time.sleep(wait_s)  # ZMQ subscriptions propagate asynchronously
        return self

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.ctx.term()

    def _run(self):
        poller = zmq.Poller()
        socks = {}
        for r, ep in self.endpoints.items():
            s = self.ctx.socket(zmq.SUB)
            s.setsockopt(zmq.RCVHWM, 0)  # keep everything: the index must not lose batches
            s.setsockopt(zmq.SUBSCRIBE, TOPIC_PREFIX)
            s.connect(ep)
            poller.register(s, zmq.POLLIN)
            socks[s] = r
        # A subscriber that joins late catches up from the replay socket first (the batches of
        # the first model that published: the benchmark's replicas serve one model).
        for r in self.replay:
            self._catch_up(r)
        self.ready.set()
        while not self.stop.is_set():
            for s, _ in poller.poll(100):
                while True:
                    try:
                        frames = s.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.last_rx = time.monotonic()
                    self._on_message(socks[s], frames)
        for s in socks:
            s.close(linger=0)

    def _replay(self, replica, start, topic=None):
        """The replay socket's batches from `start` on: [(seq, payload)], None without an answer."""
        d = self.ctx.socket(zmq.DEALER)
        d.connect(self.replay[replica])
        d.send_multipart([b"", start.to_bytes(8, "big")] + ([topic] if topic else []))
        got = []
        deadline = time.monotonic() + 10
        answered = False
        while time.monotonic() < deadline and d.poll(int((deadline - time.monotonic()) * 1000) + 1):
            _, seq_b, payload = d.recv_multipart()
            seq = int.from_bytes(seq_b, "big", signed=True)
            if seq == END_SEQ:
                answered = True
                break
            got.append((seq, payload))
        d.close(linger=0)
        return got if answered or got else None

    def _catch_up(self, replica):
        got = self._replay(replica, 0)
        if not got:
            return
        idx = self.index[replica]
        with self.lock:
            for seq, payload in sorted(got):
                idx.apply_batch(msgspec.msgpack.decode(payload))
            idx.stats["batches_replayed"] += len(got)
            idx.caught_up_to = got[-1][0] + 1
            if got[0][0] > 0:
                idx.stats["lost_batches"] += got[0][0]
        self.log(f"kv-index: {replica}: caught up on {len(got)} batches from replay")

    def _on_message(self, replica, frames):
        if len(frames) != 3:
            return
        topic, seq_b, payload = frames
        seq = int.from_bytes(seq_b, "big")
        idx = self.index[replica]
        with self.lock:
            idx.stats["messages"] += 1
            if topic not in idx.expected and idx.caught_up_to:
                # The first live message after the catch-up: the replay's topic.
                idx.expected[topic] = idx.caught_up_to
                idx.caught_up_to = None
                if seq < idx.expected[topic]:
                    return  # already applied from the replay
            expected = idx.expected.get(topic, 0)
            if seq < expected:
                # A smaller sequence number: a new publisher (a restarted replica). Its
                # predecessor's AllBlocksCleared may have been lost; start clean.
                idx.stats["restarts"] += 1
                idx.clear(time.time())
                expected = 0
            if seq > expected:
                self._fill_gap(replica, idx, topic, expected, seq)
            idx.apply_batch(msgspec.msgpack.decode(payload))
            idx.expected[topic] = seq + 1

    def _fill_gap(self, replica, idx, topic, start, upto):
        idx.stats["gaps"] += 1
        got = []
        if replica in self.replay:
            got = [(q, p) for q, p in self._replay(replica, start, topic) or [] if start <= q < upto]
        have = {s for s, _ in got}
        missing = [s for s in range(start, upto) if s not in have]
        idx.stats["lost_batches"] += len(missing)
        idx.stats["batches_replayed"] += len(got)
        if missing:
            self.log(f"kv-index: {replica}: batches {start}..{upto - 1} missed, "
                     f"{len(got)} replayed, {len(missing)} lost")
        for _, payload in sorted(got):
            idx.apply_batch(msgspec.msgpack.decode(payload))

    def settle(self, quiet=0.5, timeout=30.0):
        """Waits until no message has arrived for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        time.sleep(quiet / 2)
        while time.monotonic() < deadline and time.monotonic() - self.last_rx < quiet:
            time.sleep(0.05)

    def cached_tokens(self, prompt, live_at=None):
        """replica -> predicted cached tokens of `prompt` (now, or at epoch time `live_at`)."""
        with self.lock:
            return {r: self.index[r].cached_tokens(prompt, live_at) for r in self.replicas}

    def best(self, prompt, live_at=None):
        """(replica holding the longest cached prefix, its tokens, every replica's tokens);
        the first replica listed among equals."""
        hits = self.cached_tokens(prompt, live_at)
        top = max(hits.values())
        return next(r for r in self.replicas if hits[r] == top), top, hits

    def stored_by(self, prompt):
        """The replica that first stored this prompt's last full block (where it was computed
        first), and when; (None, None) when no replica did."""
        with self.lock:
            times = {r: self.index[r].first_stored(prompt) for r in self.replicas}
        times = {r: t for r, t in times.items() if t is not None}
        if not times:
            return None, None
        r = min(times, key=times.get)
        return r, times[r]

    def stats(self):
        with self.lock:
            out = {}
            for r, idx in self.index.items():
                live = {m: len(t) for m, t in idx.blocks.items()}
                out[r] = {**idx.stats, "live_blocks": live, "block_size": idx.block_size}
            return out


# ---------------------------------------------------------------- HTTP helpers


def post(url, body, timeout=600):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def tokenize_chat(replica, model, messages):
    """The chat request's prompt token ids, as the server computes them (vLLM's /tokenize)."""
    return post(f"{replica}/tokenize", {"model": model, "messages": messages})["tokens"]


def probe_chat(replica, model, messages):
    """One chat completion of one token straight to `replica`: (prompt_tokens, cached_tokens)."""
    r = post(f"{replica}/v1/chat/completions",
             {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0})
    usage = r.get("usage") or {}
    return usage.get("prompt_tokens"), (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicas", required=True, help="space-separated replica URLs")
    p.add_argument("--events", required=True, help="space-separated ZMQ endpoints, one per replica")
    p.add_argument("--replay", help="space-separated replay endpoints, one per replica")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--prompt", help="a user message: show each replica's cached tokens of it, and probe")
    args = p.parse_args()
    replicas = args.replicas.split()
    kv = KvIndex(replicas, args.events.split(), args.replay.split() if args.replay else None).start()
    time.sleep(args.seconds)
    kv.settle()
    print(json.dumps(kv.stats(), indent=1))
    if args.prompt:
        model = json.load(urllib.request.urlopen(f"{replicas[0]}/v1/models"))["data"][0]["id"]
        messages = [{"role": "user", "content": args.prompt}]
        tokens = tokenize_chat(replicas[0], model, messages)
        for r in replicas:
            kv.settle()
            predicted = kv.cached_tokens(tokens)[r]
            prompt_tokens, cached = probe_chat(r, model, messages)
            print(f"{r}: {len(tokens)} tokens (prompt_tokens {prompt_tokens}); "
                  f"predicted cached {predicted}, server says {cached}")
    kv.close()


if __name__ == "__main__":
    main()
