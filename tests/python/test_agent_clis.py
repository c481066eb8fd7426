"""The coding agents users point at a local server, run unmodified from their npm packages in
their own non-interactive modes: Claude Code (`claude -p`, Anthropic Messages), Codex
(`codex exec`, the Responses API through a custom provider) and opencode (`opencode run`, chat
completions through `@ai-sdk/openai-compatible`), each for a whole session against a real
`sluice serve`.

The model is the `llama-agent` fixture (scripts/make_agent_fixture.py): the Hermes-template
fixture with a 131,072-token context, since these clients send system prompts and tool lists
of tens of thousands of tokens, and weights that end each answer within a few tokens. Claude
Code and Codex ask for fixed model names (`claude-*`, `gpt-*`), which `--model-alias` sends to
it. What each session must show: the client exits successfully and reports no API error, and
sluice counted its generations as successful. Along the way Claude Code's first request asks
for more output than the context leaves (its fixed `max_tokens`), reads Anthropic's wording of
the 400 and retries smaller, and sends a mid-conversation system message; Codex (as `gpt-5.5`,
a model its catalog knows) sends its freeform `apply_patch` custom tool with a Lark grammar,
which sluice enforces, and tool types a local server cannot run (logged and skipped); opencode
streams tool-bearing chat.

`scripts/test` installs the pinned CLIs into a cache directory and names it in
$SLUICE_AGENT_CLIS; without it these tests are skipped, saying why.
"""

import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
from sluice_server import ROOT, serve

CLIS = os.environ.get("SLUICE_AGENT_CLIS")
pytestmark = pytest.mark.skipif(
    not CLIS, reason="SLUICE_AGENT_CLIS is not set: scripts/test installs the agent CLIs")
MODEL = "llama-agent"
MODEL_DIR = ROOT / "fixtures" / "models" / MODEL
# No telemetry, updates or other traffic: the machine has no network beyond loopback.
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "NO_COLOR": "1",
}


@pytest.fixture(scope="module")
def base_url():
    with serve("--model-alias", "claude-*=llama-agent", "--model-alias", "gpt-*=llama-agent",
               model_dir=MODEL_DIR) as url:
        yield url


def successes(base_url: str) -> int:
    text = urllib.request.urlopen(base_url + "/metrics").read().decode()
    match = re.search(r'vllm:request_success_total\{model_name="llama-agent",task="generate"\} (\d+)',
                      text)
    return int(match.group(1)) if match else 0


def run(argv: list[str], home: Path, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    for key in ("CODEX_HOME",):
        if key in env:
            Path(env[key]).mkdir(parents=True, exist_ok=True)
    full_env = {"PATH": os.environ["PATH"], "HOME": str(home), **QUIET, **env}
    return subprocess.run([str(Path(CLIS) / argv[0]), *argv[1:]], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


def test_claude_code_runs_a_session(base_url, tmp_path):
    before = successes(base_url)
    done = run(["claude", "-p", "Say hello.", "--output-format", "json", "--max-turns", "2"],
               tmp_path / "home", tmp_path / "work",
               {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "sk-local"})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["is_error"] is False, result
    assert result["terminal_reason"] == "completed", result
    assert result["api_error_status"] is None, result
    # Its whole prompt (system, tools, environment) was read, much of it from the prefix cache
    # on the retry after the context-limit 400.
    usage = result["usage"]
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] > 20_000, usage
    assert successes(base_url) > before


def test_codex_runs_a_session(base_url, tmp_path):
    before = successes(base_url)
    provider = (f'model_providers.sluice={{name="sluice",base_url="{base_url}/v1",'
                'wire_api="responses",env_key="SLUICE_KEY"}')
    done = run(["codex", "exec", "--skip-git-repo-check", "-c", "model_provider=sluice",
                "-c", provider, "-m", "gpt-5.5", "Say hello."],
               tmp_path / "home", tmp_path / "work",
               {"CODEX_HOME": str(tmp_path / "codex"), "SLUICE_KEY": "sk-local"})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "tokens used" in output, output
    assert not re.search(r"(?i)\berror\b", done.stdout), output
    assert successes(base_url) > before


def test_opencode_runs_a_session(base_url, tmp_path):
    before = successes(base_url)
    work = tmp_path / "work"
    work.mkdir()
    (work / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"sluice": {
            "npm": "@ai-sdk/openai-compatible", "name": "sluice",
            "options": {"baseURL": base_url + "/v1", "apiKey": "sk-local"},
            "models": {MODEL: {"name": MODEL}}}},
        "autoupdate": False, "share": "disabled"}))
    done = run(["opencode", "run", "-m", f"sluice/{MODEL}", "Say hello."],
               tmp_path / "home", work, {})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert not re.search(r"(?i)\berror\b", output), output
    # A title request and the session's own turn.
    assert successes(base_url) >= before + 2
