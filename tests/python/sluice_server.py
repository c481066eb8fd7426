"""Starts a real `sluice serve` for the Python tests: the binary ($SLUICE_BIN, default
target/debug/sluice) on the tiny llama fixture model, on a free loopback port."""

import contextlib
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / "fixtures" / "models" / "llama"
# The same weights and tokenizer with Qwen2.5's chat template (Hermes-style tool calls).
TOOLS_MODEL_DIR = ROOT / "fixtures" / "models" / "llama-tools"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(*args: str, model_dir: Path = MODEL_DIR):
    """Runs `sluice serve --model MODEL_DIR ARGS...` (the tiny llama fixture by default) until
    the block ends; yields its base URL (`http://127.0.0.1:PORT`) once it listens, fails the
    test if it never does."""
    binary = os.environ.get("SLUICE_BIN", str(ROOT / "target" / "debug" / "sluice"))
    port = free_port()
    proc = subprocess.Popen(
        [binary, "serve", "--model", str(model_dir), "--host", "127.0.0.1", "--port", str(port),
         *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    listening = threading.Event()
    log = []

    def drain():
        for line in proc.stderr:
            log.append(line)
            # It listens before its preload is done; tests start after.
            if "started: every --preload model is loaded" in line:
                listening.set()

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.time() + 120
    while not listening.is_set():
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail("sluice serve did not start:\n" + "".join(log))
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
