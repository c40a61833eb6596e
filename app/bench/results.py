"""What a benchmark run produced, per request and per workload, and its JSON form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from app.bench.acceptance import PositionAcceptance, simulated_accept_length
from app.bench.host.rounds import HostTime
from app.telemetry.metrics import ReplyStats

SCHEMA = "ling-chat.bench/1"


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request's raw numbers; `stats` is None when it failed (`error` says why)."""

    rep: int | None
    """0-based repetition; None for a warm-up request (never summarised)."""
    index: int
    stats: ReplyStats | None
    finish_reason: str | None
    error: str | None = None
    expected: str | None = None
    extracted: str | None = None
    correct: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back."""
        data = asdict(self)
        data["stats"] = self.stats.to_dict() if self.stats else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestRecord:
        """Rebuild a record written by `to_dict` (of this version or an older one)."""
        stats = data["stats"]
        return cls(**{**data, "stats": ReplyStats.from_dict(stats) if stats is not None else None})


@dataclass(frozen=True, slots=True)
class WorkloadSummary:
    """A workload's measured requests (warm-ups excluded), pooled over repetitions.

    Times are seconds; `None` where no request gave the number.
    """

    requests: int
    errors: int
    truncated: int | None
    """Replies cut off by max_new_tokens; None where that is the intended stop (synthetic)."""
    completion_tokens: int
    tpot_s: float | None
    """Median TPOT over requests."""
    tpot_p95_s: float | None
    decode_tps: float | None
    """1 / median TPOT."""
    ttft_s: float | None
    """Median TTFT."""
    latency_mean_s: float | None
    latency_p50_s: float | None
    latency_p95_s: float | None
    accept_length: float | None
    """Total completion tokens / total verify rounds, over the speculative requests."""
    accept_length_median: float | None
    """Median of the per-request accept lengths."""
    accuracy: float | None
    """Correct replies / graded requests (a failed request counts as wrong)."""
    context_tokens: float | None
    """Mean context length during decode (prompt + half the reply), for the roofline."""
    rep_decode_tps: tuple[float, ...] = ()
    """1 / median TPOT of each repetition, to judge run-to-run noise."""
    boot_decode_tps: tuple[float, ...] = ()
    """1 / median TPOT of each engine boot, when the profile was booted more than once."""
    accept_positions: PositionAcceptance | None = None
    """Acceptance by draft position, pooled over the requests that report a histogram."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back."""
        data = asdict(self)
        data["rep_decode_tps"] = list(self.rep_decode_tps)
        data["boot_decode_tps"] = list(self.boot_decode_tps)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkloadSummary:
        """Rebuild a summary written by `to_dict`."""
        boots = tuple(data.get("boot_decode_tps", ()))  # absent before `--boots`
        positions = data.get("accept_positions")  # absent before per-position acceptance
        return cls(
            **{
                **data,
                "rep_decode_tps": tuple(data["rep_decode_tps"]),
                "boot_decode_tps": boots,
                "accept_positions": PositionAcceptance.from_dict(positions) if positions else None,
            }
        )


@dataclass(frozen=True, slots=True)
class RooflineColumns:
    """A workload's measured speed against the byte model (app.bench.bytemodel.bandwidth)."""

    context_tokens: int
    """The context length the bytes were computed at."""
    bytes_per_step: float
    """Bytes one non-speculative decode step reads."""
    ceiling_tps: float
    """Peak bandwidth / bytes per step: the fastest non-speculative decode possible."""
    achieved_gbps: float | None
    """Bytes the measured decode moved per second, in GB/s."""
    peak_share: float | None
    """achieved_gbps / peak (0-1)."""
    mtp_ceiling: float | None = None
    """a / r: the speedup over plain decode this accept length allows (speculative rows)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `RooflineColumns(**d)` reads it back."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class WorkloadResult:
    """A workload on one profile: its summary, roofline columns and every request."""

    name: str
    summary: WorkloadSummary
    records: tuple[RequestRecord, ...]
    roofline: RooflineColumns | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back."""
        return {
            "name": self.name,
            "summary": self.summary.to_dict(),
            "roofline": self.roofline.to_dict() if self.roofline is not None else None,
            "requests": [record.to_dict() for record in self.records],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkloadResult:
        """Rebuild a result written by `to_dict`."""
        return cls(
            name=data["name"],
            summary=WorkloadSummary.from_dict(data["summary"]),
            records=tuple(RequestRecord.from_dict(r) for r in data["requests"]),
            roofline=RooflineColumns(**data["roofline"]) if data["roofline"] else None,
        )


@dataclass(frozen=True, slots=True)
class ProfileResult:
    """One profile's engine, proof and workloads; `error` set when the engine never ran."""

    profile: str
    engine: Mapping[str, Any] = field(default_factory=dict)
    """`describe()["config"]`: the engine's configuration."""
    proof: Mapping[str, Any] | None = None
    """`describe()["proof"]`: the proof report dict."""
    workloads: tuple[WorkloadResult, ...] = ()
    error: str | None = None
    host: HostTime | None = None
    """Its host time a round, boot by boot (`bench --host-time`)."""

    def workload(self, name: str) -> WorkloadResult | None:
        """The result of the workload called `name`, if it ran."""
        return next((w for w in self.workloads if w.name == name), None)

    @property
    def simulated_accept_length(self) -> float | None:
        """The accept length SGLang faked on this engine (`SGLANG_SIMULATE_ACC_LEN`), if any."""
        return simulated_accept_length(self.proof)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back (`simulated_accept_length` is derived)."""
        return {
            "profile": self.profile,
            "error": self.error,
            "engine": dict(self.engine),
            "proof": dict(self.proof) if self.proof is not None else None,
            "simulated_accept_length": self.simulated_accept_length,
            "workloads": [w.to_dict() for w in self.workloads],
            "host_time": self.host.to_dict() if self.host is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfileResult:
        """Rebuild a result written by `to_dict`."""
        return cls(
            profile=data["profile"],
            engine=data["engine"],
            proof=data["proof"],
            workloads=tuple(WorkloadResult.from_dict(w) for w in data["workloads"]),
            error=data["error"],
            host=HostTime.from_dict(host) if (host := data.get("host_time")) else None,
        )


@dataclass(frozen=True, slots=True)
class BenchRun:
    """A whole run: what was asked (`plan`), where (`git`) and what each profile gave."""

    created_at: str
    """ISO 8601, UTC."""
    git: Mapping[str, Any] | None
    """ling-chat's own {"version", "commit", "dirty"}; commit and dirty are None when no git
    checkout tracks the `app` package (an installed wheel). None in runs from before."""
    plan: Mapping[str, Any]
    """Profiles, workload descriptions, peak bandwidth, model: everything chosen up front."""
    profiles: tuple[ProfileResult, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back."""
        return {
            "schema": SCHEMA,
            "created_at": self.created_at,
            "git": dict(self.git) if self.git is not None else None,
            "plan": dict(self.plan),
            "profiles": [p.to_dict() for p in self.profiles],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchRun:
        """Rebuild a run written by `to_dict`.

        Raises:
            ValueError: `data` is not a ling-chat benchmark of this schema version.
        """
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} result (schema: {data.get('schema')!r})")
        return cls(
            created_at=data["created_at"],
            git=data["git"],
            plan=data["plan"],
            profiles=tuple(ProfileResult.from_dict(p) for p in data["profiles"]),
        )
