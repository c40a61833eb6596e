"""The warm-up replies every backend runs before its proof is judged, in-process and served."""

from __future__ import annotations

from app.backend.protocol import ChatBackend, ReplyDone, ReplyError
from app.core.chat import ChatMessage, Role, Sampling, Thinking
from app.core.errors import BackendError

WARMUP_MESSAGES = (ChatMessage(Role.USER, "Count from 1 to 60 in words, separated by commas."),)
WARMUP_SAMPLING = Sampling(temperature=0.0, top_p=1.0, top_k=-1, max_new_tokens=64)
"""The greedy reply whose accept length the proof judges."""
SAMPLED_WARMUP = Sampling(max_new_tokens=16)
"""A few tokens sampled the way the chat samples (temperature, top-p, top-k)."""
PLAN = (
    f"{WARMUP_SAMPLING.max_new_tokens} greedy tokens, then {SAMPLED_WARMUP.max_new_tokens} sampled"
    " (a first run may JIT-compile FlashInfer's sampling kernels)"
)


async def warm_up(backend: ChatBackend, error: type[BackendError]) -> float | None:
    """Run the greedy warm-up, then the sampled one; the greedy reply's accept length.

    None without speculation. The sampled reply is there because NEXTN verifies sampled
    drafts with kernels that greedy decoding never runs (SGLang 0.5.23 calls FlashInfer's
    top-k/top-p renormalisation for it): a stack that cannot sample fails here, at start-up,
    not on the user's first message.

    Raises:
        error: a warm-up reply ended in an error; the message says which one.
    """
    accept = None
    for kind, sampling in (("greedy", WARMUP_SAMPLING), ("sampled", SAMPLED_WARMUP)):
        # The thinking's budget is the reply's: as short as before budgets, answer or not.
        thinking = Thinking(budget=sampling.max_new_tokens)
        async for event in backend.stream_reply(WARMUP_MESSAGES, sampling, thinking=thinking):
            if isinstance(event, ReplyError):
                raise error(f"the {kind} warm-up reply failed: {event.message}")
            if isinstance(event, ReplyDone) and sampling is WARMUP_SAMPLING:
                accept = event.usage.accept_length
    return accept
