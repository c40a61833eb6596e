"""ReplaySSM verify keeps the KDA state that plain decoding computes (GPU only).

The known-answer weights silence every sublayer, KDA's included, so a known reply cannot
tell a right KDA state from a wrong one. Here the KDA layers run live: each reads the
token's embedding and adds nothing to the residual (known_answer.py, LING_CHAT_TEST_LIVE_KDA),
so the reply is still the known answer while every KDA layer's recurrent state follows the
tokens. After the same greedy reply of N tokens, the request's KDA state (SGLang's FP32
`temporal` at the slot the KDA kernels index, saved as the request is released) is compared
across engines booted one after another on the same 6-layer model:
- `humming+fp8`: plain decoding, one token a forward: the reference, at N - 1, N and N + 1
  tokens (a state one token off must differ, or the comparison could not tell);
- `stack-recurrent`, SGLang's recurrent verify (per-position state snapshots), every draft
  accepted;
- `stack`, the ReplaySSM verify (the raw-input ring folded at each commit), every draft
  accepted;
- `stack` with the draft's dummy weights: no draft accepted, one token a round.
Both stack verifies project the same 4 tokens, so theirs must agree to kernel noise; plain
decoding projects one token at a time (other GEMM tiles, other BF16 roundings), so the
verifies must agree with it to a looser bound. Overlap scheduling and the prefix cache are
off, so that no extra round runs after the last token and every request starts cold.
The prompt ends on the known answer's cycle, so the reply walks distinct tokens: off it,
the model repeats the prompt's last token, every decode step feeds the KDA layers the same
input and their state sits at a fixed point that no comparison can tell apart. Before any
assert the test prints the slot each state was read at and how far the conv window and the
state moved from one reply length to the next (decoding must move both).

    python -m pytest tests/gpu/test_replayssm_gpu.py --run-gpu -s
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

from app.bench.engine_calls import generate
from tests.gpu import models

torch = pytest.importorskip("torch", reason="needs torch and SGLang")
known_answer = pytest.importorskip("tests.gpu.known_answer", reason="needs torch and SGLang")
pytestmark = pytest.mark.gpu

TOKENS = 1 + 4 * 6
"""The reply's length: the prefill's token, then six rounds of 4 accepted tokens."""
PROMPT = [*random.Random(7).sample(range(1000, 150000), 199), models.cycle()[0]]
"""Filler tokens, then the cycle's first (`<think>`): the reply walks the cycle's distinct
tokens (thousands, far more than TOKENS + 1)."""
SAME_VERIFY = 1e-2
"""Relative state difference allowed between two verifies of the same 4 tokens (their KDA
kernels differ, the projections feeding them do not)."""
SAME_TOKENS = 5e-2
"""... between a verify and plain decoding of the same tokens (other BF16 roundings)."""
ONE_TOKEN_OFF = 0.2
"""The least relative difference a state one token off must show."""
COLD = {"disable_overlap_schedule": True, "disable_radix_cache": True}


def relative(a: Any, b: Any) -> float:
    """||a - b|| / ||b|| over every KDA layer's state."""
    return float((a - b).norm() / b.norm())


async def states_after(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    *,
    profile: str,
    lengths: list[int],
    draft_known: bool = True,
) -> tuple[dict[int, dict[str, Any]], str]:
    """Boot one engine, reply to PROMPT greedily at each length; its KDA releases
    (known_answer.save_kda_states) and reply."""
    folder = tmp_path / name
    model = models.write_model_dir(tmp_path / "model", models.layers(), known_answer=True)
    monkeypatch.setenv(known_answer.KNOWN_ANSWER_ENV, "1" if draft_known else "target")
    monkeypatch.setenv(known_answer.LIVE_KDA_ENV, "1")
    monkeypatch.setenv(known_answer.KDA_STATE_DIR_ENV, str(folder))
    monkeypatch.delenv(known_answer.BREAKAGE_ENV, raising=False)
    backend = known_answer.engine(
        model,
        folder / "logs",
        profile=profile,
        min_accept_length=1.0,
        overrides=COLD,
    )
    releases, text = {}, ""
    try:
        async for _ in backend.start():
            pass
        report = await backend.proof()
        accept = report.facts.get("warmup_accept_length")
        print(f"{name}: proof {'passed' if report.ok else 'FAILED'}, warm-up accept {accept}")
        for n in lengths:
            before = set(folder.glob("*.pt"))
            reply = await generate(
                backend,
                input_ids=PROMPT,
                sampling_params={"max_new_tokens": n, "temperature": 0.0, "ignore_eos": True},
            )
            saved = sorted(set(folder.glob("*.pt")) - before)
            assert saved, f"{name}: no KDA state was saved for the {n}-token reply"
            release = releases[n] = torch.load(saved[-1])
            if "error" in release:
                pytest.fail(f"{name}: the KDA state could not be read: {release['error']}")
            print(
                f"{name}: {n} tokens, saved {saved[-1].name}, accept "
                f"{reply.usage.accept_length}, slot {release['slot']}, state norm "
                f"{float(release['temporal'].norm()):.3e}"
            )
            text = reply.text if n == TOKENS else text
    finally:
        await backend.shutdown()
    return releases, text


def print_moves(name: str, releases: dict[int, dict[str, Any]]) -> None:
    """Print, for consecutive reply lengths, how far the conv window and the KDA state moved."""
    for shorter, longer in itertools.pairwise(sorted(releases)):
        a, b = releases[shorter], releases[longer]
        print(
            f"{name}, {shorter} -> {longer} tokens: conv moved"
            f" {relative(b['conv'], a['conv']):.2e}, state moved"
            f" {relative(b['temporal'], a['temporal']):.2e}"
        )


async def test_replayssm_keeps_the_kda_state_of_plain_decoding(tmp_path, monkeypatch):
    plain, plain_text = await states_after(
        tmp_path, monkeypatch, "plain", profile="humming+fp8",
        lengths=[TOKENS - 1, TOKENS, TOKENS + 1],
    )  # fmt: skip
    runs = {
        "recurrent": dict(profile="stack-recurrent"),
        "replayssm": dict(profile="stack"),
        "replayssm-rejected": dict(profile="stack", draft_known=False),
    }
    verified: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for name, kwargs in runs.items():
        releases, texts[name] = await states_after(
            tmp_path, monkeypatch, name, lengths=[TOKENS], **kwargs
        )
        verified[name] = releases[TOKENS]["temporal"]
    reference = plain[TOKENS]["temporal"]
    off = {n: relative(plain[n]["temporal"], reference) for n in (TOKENS - 1, TOKENS + 1)}
    against_plain = {name: relative(state, reference) for name, state in verified.items()}
    between = relative(verified["replayssm"], verified["recurrent"])
    # Printed before the asserts: a failing run still shows every number.
    print_moves("plain", plain)
    print(f"plain decoding, one token off: {off}")
    print(f"each verify against plain decoding at {TOKENS} tokens: {against_plain}")
    print(f"ReplaySSM against the recurrent verify, the same drafts: {between:.2e}")
    assert all(text == plain_text for text in texts.values()), "a verify changed the reply"
    assert float(reference.norm()) > 0, "the live KDA state stayed zero"
    assert min(off.values()) > ONE_TOKEN_OFF, "decoding one more token left the KDA state"
    assert between < SAME_VERIFY
    assert max(against_plain.values()) < SAME_TOKENS
