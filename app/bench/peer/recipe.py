"""The stock server's command line: the official Spark recipe's flags, translated for this GPU.

Stock SGLang 0.5.23 has no FP8 LM head and no way to give the NEXTN draft the target's
quantized head module, so the recipe run on it serves a BF16 head, shares the head weight
only, and verifies with SGLang's recurrent KDA verify (no ReplaySSM): the recipe as NVIDIA
measured it, less inclusionAI's SGLang branch. Everything here is pure.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.backend.engine.config import SERVER_ARGS, GpuFacts, engine_environment
from app.backend.engine.patches.boundary import PLAN_ENV
from app.core.errors import ConfigError
from app.levers.checks.no_faking import FAKING

PEER = "stock-sglang"
"""The peer's name: `bench --peer` takes it, the table's row and the JSON carry it."""
PEER_COMMAND = [sys.executable, "-m", "sglang.launch_server"]
"""Stock SGLang's server entry; the CPU tests put their double of it here."""
WHAT = "stock SGLang's server, the official Spark recipe's flags"
STOCK_LEVERS = "BF16 head, weight-only head sharing, recurrent verify"
"""What stock 0.5.23 runs where ling-chat's patches would not: the row's label says it."""
RECIPE_FLAGS: tuple[tuple[str, str | None], ...] = (
    ("--moe-runner-backend", "humming"),
    ("--attention-backend", "flashinfer"),
    ("--fp8-gemm-backend", "cutlass"),
    ("--disable-flashinfer-autotune", None),
    ("--disable-shared-experts-fusion", None),
    ("--max-running-requests", "1"),
    ("--max-mamba-cache-size", "64"),
    ("--page-size", "64"),
    ("--chunked-prefill-size", "8192"),
    ("--max-prefill-tokens", "16384"),
    ("--cuda-graph-backend-decode", "full"),
    ("--cuda-graph-max-bs-decode", "1"),
    ("--cuda-graph-bs-decode", "1"),
    ("--cuda-graph-backend-prefill", "disabled"),
    ("--speculative-algorithm", "NEXTN"),
    ("--speculative-num-steps", "3"),
    ("--speculative-eagle-topk", "1"),
    ("--speculative-num-draft-tokens", "4"),
)
"""The server flags of the recipe's stack (inclusionAI's ling-cookbook DGX Spark notebook), less
`--mem-fraction-static`, which the run's `mem_fraction` sets for every row alike."""
_MACHINE_FLAGS = {
    "--attention-backend": ("attention", "attention_backend"),
    "--fp8-gemm-backend": ("FP8 GEMM", "fp8_gemm_runner_backend"),
}
"""Recipe flags whose value depends on the GPU -> (what the label calls them, ling-chat's
setting that translates them: the same choice as ling-chat's rows on this GPU)."""
NOT_INHERITED = (PLAN_ENV, "SGLANG_LOGGING_CONFIG_PATH")
"""Variables an in-process engine sets for its own SGLang processes: the stock server must not
see ling-chat's patch plan or its logging config, even where they were set before the run."""


@dataclass(frozen=True, slots=True)
class PeerLaunch:
    """How the stock server is started on this machine, and what its row says about it."""

    model_path: str
    mem_fraction: float
    context_length: int | None
    gpu: GpuFacts
    unapplied: tuple[str, ...] = ()
    """The run's `--sglang-arg` settings: they change ling-chat's rows, not the stock server's."""

    def flags(self) -> list[tuple[str, str | None]]:
        """The recipe's flags with this GPU's values; a flag with no value here is left out."""
        settings = {s.name: s for s in SERVER_ARGS}
        flags: list[tuple[str, str | None]] = []
        for flag, value in RECIPE_FLAGS:
            if flag in _MACHINE_FLAGS:
                value = settings[_MACHINE_FLAGS[flag][1]].on(self.gpu)
                if value is None:
                    continue
            flags.append((flag, value))
        if settings["grammar_backend"].on(self.gpu) == "none":  # no xgrammar installed
            flags.append(("--grammar-backend", "none"))
        return flags

    def argv(self, port: int) -> list[str]:
        """The whole command line of a server listening on 127.0.0.1:`port`."""
        argv = [*PEER_COMMAND, "--model-path", self.model_path, "--host", "127.0.0.1"]
        argv += ["--port", str(port), "--mem-fraction-static", f"{self.mem_fraction:g}"]
        # The model is its own NEXTN draft. SGLang 0.5.23 fills the path in only for the
        # architectures it lists (arg_groups/speculative_hook.py), BailingMoeV3 not among them.
        argv += ["--speculative-draft-model-path", self.model_path]
        if self.context_length is not None:
            argv += ["--context-length", str(self.context_length)]
        for flag, value in self.flags():
            argv += [flag] if value is None else [flag, value]
        return argv

    def translations(self) -> list[str]:
        """Where this run departs from the recipe, e.g. `attention fa3, not flashinfer`."""
        recipe, here = dict(RECIPE_FLAGS), dict(self.flags())
        changes = []
        for flag, (name, _setting) in _MACHINE_FLAGS.items():
            value = here.get(flag, "auto")
            if value != recipe[flag]:
                changes.append(f"{name} {value}, not {recipe[flag]}")
        if "--grammar-backend" in here:
            changes.append("no grammar backend (xgrammar missing)")
        if self.unapplied:
            changes.append(f"--sglang-arg {', '.join(self.unapplied)} not applied to it")
        return changes

    def label(self, sglang_version: str) -> str:
        """The row's description: which SGLang, the recipe, and this machine's departures."""
        found = self.translations()
        where = f"; on sm_{self.gpu.sm}: {', '.join(found)}" if found else ""
        return f"{WHAT} (SGLang {sglang_version}: {STOCK_LEVERS}){where}"

    def environment(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """The server's variables: `inherited` (this process's as the run began: SGLang's
        in-process engines set more in it, e.g. the stack's ReplaySSM its state dtype), less
        ling-chat's own, plus the recipe's (a variable the user set keeps its value)."""
        env = {k: v for k, v in inherited.items() if k not in NOT_INHERITED}
        return {**engine_environment(), **env}


def peer_refusal(
    model_path: str, overrides: Mapping[str, Any], environ: Mapping[str, str]
) -> str | None:
    """Why the stock server cannot be measured on this model, or None.

    It loads what the files hold: a dummy load (`load_format=dummy`) or a folder of config
    alone would give it random weights that ling-chat's rows do not have. It has no proof:
    a variable that fakes acceptance or changes the quantization (`environ`) would change
    its row unseen, where ling-chat's rows name it.
    """
    if faking := [name for name in FAKING if environ.get(name, "") != ""]:
        return f"--peer {PEER} has no proof to show {', '.join(faking)}: unset it"
    if overrides.get("load_format") == "dummy":
        return f"--peer {PEER} needs real weights: drop --sglang-arg load_format=dummy"
    folder = Path(model_path).expanduser()
    if folder.is_dir() and not any(folder.glob("*.safetensors")):
        return f"--peer {PEER} needs real weights: {folder} holds no *.safetensors (config only)"
    return None


def check_peer_model(
    model_path: str, overrides: Mapping[str, Any], environ: Mapping[str, str]
) -> None:
    """Raises ConfigError (one line) when `peer_refusal` refuses."""
    if problem := peer_refusal(model_path, overrides, environ):
        raise ConfigError(problem)
