"""A KV event subscriber for benchmarks: counts the batches and events it receives from one
`sluice serve --kv-events` endpoint and the gaps in their sequence numbers, until SIGTERM or
SIGINT, then prints one JSON line. With --idle it connects, subscribes and never reads (a
subscriber that does not keep up).

    python bench/kv_events_sub.py tcp://127.0.0.1:5557 [--idle]
"""

import argparse
import json
import signal
import sys
import time

import msgspec
import zmq


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("--idle", action="store_true", help="connect and never read")
    ap.add_argument("--topic", default="kv@")
    args = ap.parse_args()
    stop = False

    def on_signal(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.connect(args.endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, args.topic.encode())
    if args.idle:
        while not stop:
            time.sleep(0.2)
        print(json.dumps({"idle": True}))
        return
    decoder = msgspec.msgpack.Decoder()  # untyped: the shapes are checked by the tests
    last: dict[bytes, int] = {}
    stats = {"batches": 0, "events": 0, "stored_blocks": 0, "removed_blocks": 0, "gaps": 0,
             "missed_batches": 0, "bytes": 0}
    while not stop:
        if not sub.poll(200):
            continue
        topic, seq, payload = sub.recv_multipart()
        seq = int.from_bytes(seq, "big")
        if topic in last and seq != last[topic] + 1:
            stats["gaps"] += 1
            stats["missed_batches"] += seq - last[topic] - 1
        last[topic] = seq
        batch = decoder.decode(payload)
        stats["batches"] += 1
        stats["bytes"] += len(payload)
        for event in batch[1]:
            stats["events"] += 1
            tag = event[0] if isinstance(event, list) else event["type"]
            hashes = event[1] if isinstance(event, list) else event.get("block_hashes", [])
            if tag == "BlockStored":
                stats["stored_blocks"] += len(hashes)
            elif tag == "BlockRemoved":
                stats["removed_blocks"] += len(hashes)
    print(json.dumps(stats))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
