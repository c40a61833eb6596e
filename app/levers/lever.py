"""The `Lever` record: one lever, every part of it stated in its own module.

A lever is whatever the proof judges on the running model: an optimization (Humming, the
FP8 head, NEXTN, ...) or a guard of the results (no result-faking variable, the warm-up
accept length). Each module under app/levers/model, app/levers/draft and app/levers/checks
defines one `LEVER`; a profile (app/levers/profiles.py) is a list of them. What reads which
part:

- `args`, `free`, `refuse`, `refuse_env`, `runs_on`: the refusals before every start
  (app/levers/refusals.py), and `args` the engine's server arguments (engine/config.py);
- `packages`, `runs_on.min_sm`: the preflight (app/backend/firststart/preflight.py);
- `patch`: the scheduler's patch plan (app/backend/engine/patches/plan.py);
- `facts`: the scheduler's evidence (app/backend/engine/patches/evidence.py);
- `lines`, `judge`, `reads`: the proof (app/backend/proof/report.py);
- `bytes`: the byte model (app/bench/bytemodel).

Nothing here imports SGLang, torch or another part of ling-chat but app.core: the scheduler
imports the levers for their fact readers, the app for everything else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from app.core.proof_report import ProofLine

if TYPE_CHECKING:
    from app.levers.live import Live

Facts = Mapping[str, Any]
Reader = Callable[["Live"], Any]
"""Reads one fact in SGLang's scheduler, from its live objects (a raised error becomes the
fact's `error`, on which the proof fails)."""


@dataclass(frozen=True, slots=True)
class Line:
    """One proof line a lever may print: its key, title and the fix shown when it fails."""

    key: str
    title: str
    fix: str


@dataclass(frozen=True, slots=True)
class Package:
    """A module a lever runs on: the preflight imports it (exit status 3 when it fails)."""

    module: str
    dist: str
    """The distribution that brings it, as the preflight's line names it."""
    fix: str


@dataclass(frozen=True, slots=True)
class RunsOn:
    """Where a lever runs: the values of the server arguments it works with, and the GPUs."""

    why: str
    """Where the lists come from (SGLang 0.5.23's source, a measurement)."""
    settings: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Server argument -> the values the lever runs on; an override naming another value is
    refused before anything loads (the lever's own values are among them)."""
    min_sm: int | None = None
    """The oldest GPU (compute capability as major*10+minor) it runs on; None: any CUDA GPU."""


@dataclass(frozen=True, slots=True)
class ByteTerm:
    """What a lever changes in the byte model's count of a step or round (app/bench/bytemodel
    reads the merged terms of a profile); None or empty: unchanged."""

    why: str
    """What the term stands for, or why the lever changes no byte the model counts."""
    head: str | None = None
    """The LM head's format: `fp8`, `fp32-logits` (None: BF16 with BF16 logits)."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """config.json fields the engine overrides (the model's shapes and dtypes are read so)."""
    round: str | None = None
    """The round's shape: `nextn` (draft steps, then the verify), `dspark` (a block)."""
    kda_snapshots: bool | None = None
    """False: the verify writes no KDA state snapshot a draft position (ReplaySSM)."""
    draft_linears: str | None = None
    """The DSpark draft's layer linears: `fp8` (None: BF16)."""
    draft_head_rows: int | None = None
    """The rows of the head the NEXTN draft reads (None: all of the target's)."""
    markov_w2_reads: int | None = None
    """How often a DSpark round reads its draft's Markov `markov_w2`: once per draft position
    (None: once, with the rest of the draft)."""


def merged(terms: Iterable[ByteTerm]) -> ByteTerm:
    """The terms of a profile's levers as one (a later lever's set field wins)."""
    total = ByteTerm(why="")
    for term in terms:
        changes = {
            f.name: getattr(term, f.name)
            for f in fields(term)
            if f.name != "why" and getattr(term, f.name) not in (None, {})
        }
        if "config" in changes:
            changes["config"] = {**total.config, **changes["config"]}
        total = replace(total, **changes)
    return total


@dataclass(frozen=True, slots=True)
class Context:
    """What a lever's server arguments depend on besides the lever itself."""

    model_path: str
    dspark_draft: str
    window: int | None
    """The verify window of the profile's draft (None: no draft)."""


Args = Callable[[Context, bool], Mapping[str, Any]]
"""The server arguments a lever sets, on (True) or off (False) in the profile."""
Refuse = Callable[[str, Any, "Profile"], str | None]
"""Why an override `key=value` (None: handed back to SGLang) contradicts the lever in this
profile, beyond changing a value it sets: `contradicts ...`, or None."""
RefuseEnv = Callable[[Mapping[str, str], "Profile"], str | None]
"""Why a variable of the environment contradicts the lever in this profile, or None."""
Judge = Callable[[Facts, "Profile"], tuple[ProofLine, ...]]
"""The lever's proof lines for this profile (none where it has no line there)."""


def no_args(context: Context, on: bool) -> Mapping[str, Any]:
    """A lever that sets no server argument."""
    return {}


def no_refusal(key: str, value: Any, profile: Profile) -> str | None:
    """A lever that no override contradicts beyond the values it sets."""
    return None


def no_env_refusal(env: Mapping[str, str], profile: Profile) -> str | None:
    """A lever that no variable contradicts."""
    return None


def fits_any(profile: Profile) -> str | None:
    """A lever that fits any profile."""
    return None


@dataclass(frozen=True, slots=True)
class Lever:
    """One lever, stated once (every field has no default: a lever states each part)."""

    name: str
    """Its key in the registry and in a profile's list, e.g. `humming`."""
    called: str
    """The lever in words, in a refusal: `the Humming MoE lever`."""
    called_off: str
    """What a profile without it runs instead, in words: `the recipe's FlashInfer MXFP4 MoE`."""
    lines: tuple[Line, ...]
    """Every proof line it may print, with its title and fix."""
    args: Args
    args_why: str
    """Why it sets those server arguments (docs/engine-settings.md shows an opt-in lever's)."""
    free: frozenset[str]
    """Server arguments it sets that an override may change (the proof judges the result)."""
    refuse: Refuse
    refuse_env: RefuseEnv
    packages: tuple[Package, ...]
    """What it runs on, when on."""
    packages_off: tuple[Package, ...]
    """What a profile without it runs on instead (the recipe's kernels)."""
    runs_on: RunsOn
    patch: str | None
    """Its scheduler-side patch: a module of app/backend/engine/patches with an `install`
    function, installed when the lever is on; None: it installs none."""
    facts: Mapping[str, Reader]
    """The facts it collects from the live model in the scheduler, by key."""
    reads: tuple[str, ...]
    """The facts its judge reads (its own and others'): without them its lines fail."""
    judge: Judge
    bytes: ByteTerm
    fits: Callable[[Profile], str | None]
    """Why it cannot be in this profile (a lever it needs is missing), or None."""
    draft_window: int | None
    """A draft lever's verify window in tokens (the ReplaySSM ring is sized for it); None:
    not a draft. A profile has one draft lever at most."""
    validate: Callable[[Mapping[str, Any]], str | None] | None
    """Why the server arguments (its own and the overrides) cannot work, where SGLang would
    refuse them only late; None: nothing to check."""

    def line(self, key: str) -> Line:
        """Its line `key`."""
        return next(line for line in self.lines if line.key == key)


@dataclass(frozen=True, slots=True)
class Profile:
    """A named list of levers: what a start turns on (the registry's others are off)."""

    name: str
    levers: tuple[Lever, ...]

    def __post_init__(self) -> None:
        drafts = [lever.name for lever in self.levers if lever.draft_window is not None]
        if len(drafts) > 1:
            raise ValueError(f"profile {self.name}: one draft at most, got {', '.join(drafts)}")
        for lever in self.levers:
            if problem := lever.fits(self):
                raise ValueError(f"profile {self.name}: {problem}")

    def has(self, lever: Lever | str) -> bool:
        """Whether the lever (or the lever of that name) is on in this profile."""
        name = lever if isinstance(lever, str) else lever.name
        return any(own.name == name for own in self.levers)

    @property
    def names(self) -> tuple[str, ...]:
        """Its levers' names, in order."""
        return tuple(lever.name for lever in self.levers)

    @property
    def window(self) -> int | None:
        """The verify window of its draft, or None without one."""
        return next((x.draft_window for x in self.levers if x.draft_window is not None), None)

    @property
    def speculative(self) -> bool:
        """Whether it runs a draft model."""
        return self.window is not None

    @property
    def patches(self) -> tuple[str, ...]:
        """The scheduler-side patches its levers install, in order."""
        return tuple(lever.patch for lever in self.levers if lever.patch is not None)

    @property
    def bytes(self) -> ByteTerm:
        """Its levers' byte-model terms, merged."""
        return merged(lever.bytes for lever in self.levers)
