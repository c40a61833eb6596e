"""lab/scripts/gpu_agenda.sh: the arguments its steps give ling-chat (no GPU needed)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

AGENDA = Path(__file__).resolve().parents[1] / "scripts" / "gpu_agenda.sh"


def variable(name: str) -> list[str]:
    """The words of one of the agenda's `NAME="..."` settings."""
    match = re.search(rf'^{name}="([^"]*)"', AGENDA.read_text(), re.MULTILINE)
    assert match, name
    return shlex.split(match.group(1))


def lines_running(command: str) -> list[str]:
    """The agenda's lines that run `command` (continuation lines joined)."""
    text = AGENDA.read_text().replace("\\\n", " ")
    return [
        line for line in text.splitlines() if command in line and not line.lstrip().startswith("#")
    ]


def test_the_agenda_is_valid_bash():
    subprocess.run(["bash", "-n", str(AGENDA)], check=True)


def test_every_prepare_of_the_config_only_model_says_its_load_is_dummy():
    # The preflight reads the checkpoint's headers unless the load is dummy: /root/m6 holds
    # a config and a tokenizer, and the prepare step was refused on it.
    assert variable("DUMMY") == ["--sglang-arg", "load_format=dummy"]
    prepares = lines_running("python3 -m app prepare --model /root/m6")
    assert len(prepares) == 3
    assert all("$DUMMY" in line for line in prepares)


def test_beside_stock_sglang_ling_chats_engines_load_as_stock_does():
    assert variable("PEER_LOAD") == ["--sglang-arg", "load_format=auto"]
    peers = lines_running("--peer stock-sglang")
    assert len(peers) == 2  # peer_bench (peer6, peer24) and bench-peer
    assert all("$PEER_LOAD" in line for line in peers)
