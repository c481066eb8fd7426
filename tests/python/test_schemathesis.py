"""schemathesis against a real `sluice serve`: every operation of `/openapi.json`, every check
(`--checks all`: no 5xx, status codes and bodies as documented, bad input refused, good input
accepted, auth enforced), with an API key, at a small example count. Zero failures.

Runs the server binary ($SLUICE_BIN, default target/debug/sluice) on the tiny fixture model on
a free loopback port. The run is seeded, so a failure reproduces.
"""

import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / "fixtures" / "models" / "llama"
API_KEY = "schemathesis-key"
MAX_EXAMPLES = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def base_url():
    binary = os.environ.get("SLUICE_BIN", str(ROOT / "target" / "debug" / "sluice"))
    port = free_port()
    proc = subprocess.Popen(
        [binary, "serve", "--model", str(MODEL_DIR), "--host", "127.0.0.1", "--port", str(port),
         "--api-key", API_KEY, "--no-ui"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    listening = threading.Event()
    log = []

    def drain():
        for line in proc.stderr:
            log.append(line)
            if re.search(r"listening on http://", line):
                listening.set()

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.time() + 120
    while not listening.is_set():
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail("sluice serve did not start:\n" + "".join(log))
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_schemathesis_finds_no_failure_with_every_check(base_url, tmp_path):
    schemathesis = Path(sys.executable).parent / "schemathesis"
    command = [
        str(schemathesis), "run", f"{base_url}/openapi.json",
        "--checks", "all",
        "--header", f"Authorization: Bearer {API_KEY}",
        "--max-examples", str(MAX_EXAMPLES),
        "--seed", "14",
        "--workers", "2",
        "--generation-database", "none",
        "--request-timeout", "30",
        "--no-color",
    ]
    started = time.time()
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    elapsed = time.time() - started
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "API Operations" in output, output
    print(f"schemathesis: {elapsed:.1f} s")
