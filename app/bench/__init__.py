"""`ling-chat bench`: batch-1 decode speed and accuracy of each profile, and the roofline."""

from app.bench.protocol import BenchEngine, BenchSample, EngineFactory
from app.bench.results import BenchRun, ProfileResult, WorkloadSummary
from app.bench.runner import run_bench

__all__ = [
    "BenchEngine",
    "BenchRun",
    "BenchSample",
    "EngineFactory",
    "ProfileResult",
    "WorkloadSummary",
    "run_bench",
]
