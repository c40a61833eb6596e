"""The hot-vocabulary draft head (opt-in, `stack+hot-vocab`; FR-Spec, "Frequency-Ranked
Speculative Sampling"): the NEXTN draft's three steps read `ROWS` rows of the FP8 head, the
most frequent tokens' (a shipped list, hot_list.py), with their per-row scales, sliced bit
for bit from the target's FP8 head at load; the verify keeps the full head, so the output
is the same, and only acceptance can drop, where the next token is not hot.

SGLang 0.5.23's own path (`speculative_token_map`, `hot_token_id`) clones a BF16 slice of
the head tensor and skips `set_lm_head_from_target`: on ling-chat's FP8 head it would hand
FP8 bytes to a BF16 method, which sharing.py refuses. So the patch (patches/hot_vocab.py)
keeps the shared module, builds the FP8 slice itself, routes only the draft's logits
through it and hands SGLang's draft worker the id table (`hot_token_id`), through which
SGLang maps each draft step's top-1 back to the full vocabulary.

One line, on its own profile only. Without the hot list the scheduler refuses to start
before loading anything; none is shipped until one is built from the real tokenizer and its
coverage measured (no default profile has the lever until then).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.core.proof_report import ProofLine
from app.levers.lever import (
    ByteTerm,
    Context,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    no_env_refusal,
)
from app.levers.lines import error, judged, lacking
from app.levers.live import Live
from app.levers.model.fp8_head import FP8_DTYPE, MIN_TOP1
from app.levers.model.fp8_head import METHOD as FULL_METHOD

ROWS = 32768
"""The hot head's rows: 32K, an EAGLE-3-style draft vocabulary (shared/research/
perf-anchors.md), 21% of the 157,184-row head."""
LIST = Path(__file__).with_name("hot_vocab_ids.json")
"""Where the hot list is shipped (built by lab/scripts/hot_vocab.py; none yet)."""
METHOD = "LingHotFp8HeadMethod"
"""The class name of the hot head's method: ling-chat's FP8 head method with its own call
counters."""
HEAD_ATTR = "ling_chat_hot_head"
"""Where the patch leaves the hot head: on SGLang's draft worker, and on the `forward` it
gives the draft's logits processor, which passes that head (the evidence compares the two)."""
MIN_COSINE = 0.999
"""Least cosine of the hot head's logits against the full head's at the hot ids (the same
FP8 bytes and scales: only the kernels' rounding may differ)."""
TOKEN_MAP = "speculative_token_map"
REJECTION = "speculative_use_rejection_sampling"
FACT = "hot_vocab"
NEEDED = (
    *("installed", "rows", "vocab", "list_sha256", "tokenizer_sha256", "weight_dtype"),
    *("weight_shape", "scale_shape", "rows_equal", "scales_equal", "distinct_storage"),
    *("selftest_cosine", "selftest_top1", "kernel", "timing_us", "bytes_hot", "bytes_full"),
    *("draft_head", "logits_path_reads_hot", "worker_ids", "worker_ids_are_head_ids"),
    *("captured_calls",),
)
"""What the line reads from the hot head's facts."""
LINE = Line(
    "hot_vocab",
    f"NEXTN draft head over the {ROWS:,} hot tokens (opt-in)",
    "build the hot list (`python lab/scripts/hot_vocab.py build`, from Ling-3.0-flash's "
    "tokenizer) and run profile stack+hot-vocab as ling-chat sets it (no "
    "speculative_token_map: SGLang's own slice is BF16)",
)
WHY = (
    "sets no server argument: SGLang's `speculative_token_map` would slice a BF16 copy of the "
    "head and drop the whole-module sharing; the patch slices the FP8 head itself, so the "
    f"draft's 3 steps read {ROWS:,} of its 157,184 rows (byte model: 0.96 GB less a round)"
)


def refuse(key: str, value: Any, profile: Profile) -> str | None:
    """SGLang's own token map (a BF16 slice), and rejection sampling, which needs the draft's
    full vocabulary (SGLang 0.5.23 refuses it with a hot vocabulary, only after load)."""
    if key == TOKEN_MAP and value is not None:
        called = LEVER.called if profile.has(LEVER) else LEVER.called_off
        return (
            f"contradicts {called} of profile {profile.name}: SGLang's token map slices a BF16 "
            "copy of the head, which the FP8 head's draft cannot read"
        )
    if key == REJECTION and value not in (None, False) and profile.has(LEVER):
        return (
            f"contradicts {LEVER.called} of profile {profile.name}: SGLang's rejection "
            "sampling needs the draft's full vocabulary"
        )
    return None


def args(context: Context, on: bool) -> dict[str, Any]:
    """None: the patch does it all (WHY)."""
    return {}


def draft_head(head: Any) -> dict[str, Any] | None:
    """The head the patch built for the draft: its method and FP8 weight, or None."""
    if head is None:
        return None
    weight = head.weight
    return {
        "quant_method": type(getattr(head, "quant_method", None)).__name__,
        "weight_dtype": str(weight.dtype).removeprefix("torch."),
        "weight_shape": list(weight.shape),
    }


def collect(live: Live) -> dict[str, Any] | None:
    """What building the hot head found, whether the live hot head still holds the target's
    rows, and where the live draft reads its logits from; None without a NEXTN draft."""
    if live.draft is None:
        return None
    patch = live.sources.patch("hot_vocab")
    head = getattr(live.draft_worker, HEAD_ATTR, None)
    table = getattr(live.draft_worker, "hot_token_id", None)
    routed = getattr(getattr(live.draft.logits_processor, "forward", None), HEAD_ATTR, None)
    return {
        **patch.FACTS,
        **patch.compare(head, live.target.lm_head),
        "draft_head": draft_head(head),
        "logits_path_reads_hot": head is not None and routed is head,
        "worker_ids": None if table is None else int(table.shape[0]),
        "worker_ids_are_head_ids": table is not None and table is getattr(head, "hot_ids", None),
        "captured_calls": patch.CALLS["captured"],
    }


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """The draft's logits read the hot FP8 slice of the target's head, its ids map back, and
    the verify reads the full head; no line on a profile without the lever."""
    if not profile.has(LEVER):
        return ()
    if err := error(facts, FACT, "head_target"):
        return (judged(LINE, False, err),)
    hot, target = facts[FACT], facts["head_target"]
    if not hot.get("installed"):
        return (judged(LINE, False, "no hot head was built: the draft reads the full head"),)
    if missing := lacking(LINE, FACT, hot, NEEDED):
        return (missing,)
    return (judged(LINE, _ok(hot, target), _evidence(hot, target)),)


def _ok(hot: Facts, target: Facts) -> bool:
    head = hot["draft_head"] or {}
    vocab = hot["vocab"]
    return (
        hot["rows"] == ROWS < vocab
        and head.get("quant_method") == METHOD
        and head.get("weight_dtype") == FP8_DTYPE
        and head.get("weight_shape") == hot["weight_shape"]
        and hot["weight_shape"][-1] == ROWS
        and hot["rows_equal"]
        and hot["scales_equal"]
        and hot["distinct_storage"]
        and hot["selftest_cosine"] >= MIN_COSINE
        and hot["selftest_top1"] >= MIN_TOP1
        and hot["logits_path_reads_hot"]
        and hot["worker_ids"] == ROWS
        and hot["worker_ids_are_head_ids"]
        and hot["captured_calls"] > 0
        and target["quant_method"] == FULL_METHOD
        and target["weight_dtype"] == FP8_DTYPE
        and (target["weight_shape"] or [0])[-1] == vocab
    )


def _evidence(hot: Facts, target: Facts) -> str:
    head = hot["draft_head"] or {}
    timing = hot["timing_us"]
    return (
        f"the draft's logits read {head.get('weight_dtype')} {head.get('weight_shape')} via "
        f"{head.get('quant_method')} (routed: {hot['logits_path_reads_hot']}), {hot['rows']:,} "
        f"of {hot['vocab']:,} rows sliced from the target's head (bytes equal: "
        f"{hot['rows_equal']}, scales equal: {hot['scales_equal']}, own storage: "
        f"{hot['distinct_storage']}; {hot['bytes_hot'] / 1e6:.0f} MB instead of "
        f"{hot['bytes_full'] / 1e6:.0f} MB a step); against the full head at the hot ids: cosine "
        f"{hot['selftest_cosine']:.4f}, top-1 {hot['selftest_top1']:.0%} mapped back; the draft "
        f"worker maps {hot['worker_ids']} ids back (the head's table: "
        f"{hot['worker_ids_are_head_ids']}); {hot['captured_calls']} calls in the draft's graph "
        f"capture on {hot['kernel']} ({timing['hot']} us against the full head's "
        f"{timing['full']} us at M=1); the verify reads {target['weight_dtype']} "
        f"{target['weight_shape']} via {target['quant_method']}; list {hot['list_sha256'][:12]} "
        f"(tokenizer {hot['tokenizer_sha256'][:12]})"
    )


def fits(profile: Profile) -> str | None:
    """It slices the FP8 head for the NEXTN draft."""
    if profile.has("nextn") and profile.has("fp8_head"):
        return None
    return "the hot-vocabulary draft head slices the FP8 head for NEXTN: it needs both"


LEVER = Lever(
    name="hot_vocab",
    called="the hot-vocabulary draft head lever",
    called_off="the draft's full head",
    lines=(LINE,),
    args=args,
    args_why=WHY,
    free=frozenset(),
    refuse=refuse,
    refuse_env=no_env_refusal,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(
        why="a slice of ling-chat's FP8 head, on SGLang's CUTLASS FP8 path (sm_89 and newer)",
        min_sm=89,
    ),
    patch="hot_vocab",
    facts={FACT: collect},
    reads=(FACT, "head_target"),
    judge=judge,
    bytes=ByteTerm(
        why=f"each of the draft's 3 forwards reads {ROWS:,} rows of the FP8 head and writes "
        f"{ROWS:,} logits, not 157,184",
        draft_head_rows=ROWS,
    ),
    fits=fits,
    draft_window=None,
    validate=None,
)
