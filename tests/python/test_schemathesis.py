"""schemathesis against a real `sluice serve`: every operation of `/openapi.json`, every check
(`--checks all`: no 5xx, status codes and bodies as documented, bad input refused, good input
accepted, auth enforced), with an API key, at a small example count. Zero failures.

Runs the server binary ($SLUICE_BIN, default target/debug/sluice) on the tiny fixture model on
a free loopback port. The run is seeded, so a failure reproduces. `schemathesis.toml` beside
this file lists the routes whose schema-valid bodies may get a 400 for reasons a schema cannot
state (context length, the model's task, cross-field rules), and why.
"""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from sluice_server import serve

API_KEY = "schemathesis-key"
MAX_EXAMPLES = 8


@pytest.fixture(scope="module")
def base_url():
    with serve("--api-key", API_KEY, "--no-ui") as url:
        yield url


def test_schemathesis_finds_no_failure_with_every_check(base_url, tmp_path):
    schemathesis = Path(sys.executable).parent / "schemathesis"
    command = [
        str(schemathesis), "--config-file", str(Path(__file__).with_name("schemathesis.toml")),
        "run", f"{base_url}/openapi.json",
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
