"""The KDA ReplaySSM commit fed the verify's prepared indices (NEXTN with ReplaySSM).

SGLang 0.5.23's NEXTN verify makes each request's last accepted step and its mamba-track step
in one fused kernel at top-1 and hands them to `commit_mamba_states_after_verify`, whose KDA
ReplaySSM branch ignores them and recomputes both with about 20 eager ops a round. The
lever's patch (app/backend/engine/patches/host/commit.py) puts a commit in its place that hands
the kernel the prepared indices (the same values; the state bitwise the same). DSpark's worker
commits through its own path, which SGLang prepares no indices for: the lever is NEXTN's.

SGLang attributes read (by the patch): `eagle_worker_common.commit_mamba_states_after_verify`,
the commit the verify calls; the commits it counted, fed and left to SGLang's function.
"""

from __future__ import annotations

from app.core.proof_report import ProofLine
from app.levers.host import patch_reader
from app.levers.lever import (
    ByteTerm,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    no_args,
    no_env_refusal,
    no_refusal,
)
from app.levers.lines import error, judged

PATCH = "host.commit"
LINE = Line(
    "prepared_commit",
    "KDA ReplaySSM commit fed the verify's prepared indices",
    "run ling-chat's engine (its scheduler entry installs the commit) with NEXTN top-1: "
    "SGLang prepares the indices only for a top-1 chain",
)


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """The verify commits through ling-chat's commit, on a KDA pool that folds each commit, at
    top-1 (where SGLang's verify prepares the indices); no line without the lever."""
    if not profile.has(LEVER):
        return ()
    if err := error(facts, "prepared_commit", "replayssm", "speculative"):
        return (judged(LINE, False, err),)
    fed, pool, spec = facts["prepared_commit"], facts["replayssm"], facts["speculative"]
    ok = bool(fed["fed_prepared"] and pool["kda_fold"] and spec["topk"] == 1)
    return (
        judged(
            LINE,
            ok,
            f"the verify commits through {fed['verify_calls']} (fed the prepared indices: "
            f"{fed['fed_prepared']}); KDA fold-every-commit: {pool['kda_fold']}; top-"
            f"{spec['topk']}; {fed['prepared_commits']} fed and {fed['stock_commits']} stock "
            "commits before the warm-up",
        ),
    )


def fits(profile: Profile) -> str | None:
    """It feeds NEXTN's verify commit to the ReplaySSM kernel: it needs both."""
    if profile.has("nextn") and profile.has("replayssm"):
        return None
    return "the prepared commit feeds NEXTN's ReplaySSM commit: it needs NEXTN and ReplaySSM"


LEVER = Lever(
    name="prepared_commit",
    called="the prepared-commit lever",
    called_off="SGLang's KDA ReplaySSM commit",
    lines=(LINE,),
    args=no_args,
    args_why="none: a scheduler-side patch",
    free=frozenset(),
    # what it depends on is NEXTN's top-1 chain and ReplaySSM's ring, refused in their names
    refuse=no_refusal,
    refuse_env=no_env_refusal,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(why="SGLang 0.5.23's NEXTN verify at top-1 on a CUDA GPU (the fused kernel)"),
    patch=PATCH,
    facts={"prepared_commit": patch_reader(PATCH)},
    reads=("prepared_commit", "replayssm", "speculative"),
    judge=judge,
    bytes=ByteTerm(why="host time: the same kernel reads the same bytes, fed its indices"),
    fits=fits,
    draft_window=None,
    validate=None,
)
