"""The engine-facing commands' CPU parts: flags, refusals and the doctor's report text."""

from __future__ import annotations

import argparse

import pytest

from app.cli import build_parser, main
from app.commands import serve
from app.commands.common import sglang_overrides
from app.core.errors import ConfigError
from app.core.proof_report import ProofLine, ProofReport, Verdict
from app.render.proof import format_report


def serve_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def sglang_args(*pairs: str, before: bool = False) -> argparse.Namespace:
    """`ling-chat doctor` with each pair as --sglang-arg, after the sub-command or before it."""
    flags = [arg for pair in pairs for arg in ("--sglang-arg", pair)]
    return build_parser().parse_args([*flags, "doctor"] if before else ["doctor", *flags])


@pytest.mark.parametrize("before", [False, True])
def test_sglang_args_parse_json_values_and_keep_strings(before: bool):
    pairs = ("load_format=dummy", "context-length=4096", "x=[1, 2]")
    got = sglang_overrides(sglang_args(*pairs, before=before))
    assert got == {"load_format": "dummy", "context_length": 4096, "x": [1, 2]}
    assert sglang_overrides(sglang_args()) == {}
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        sglang_overrides(sglang_args("nonsense"))


def test_sglang_args_override_serves_defaults_but_not_its_bind():
    overrides = serve.serve_overrides(
        serve_args("--sglang-arg", "max_running_requests=4", "--sglang-arg", "host=0.0.0.0")
    )
    assert (overrides["max_running_requests"], overrides["host"]) == (4, "127.0.0.1")
    assert overrides["cuda_graph_bs_decode"] is None


def test_serve_binds_loopback_by_default_and_passes_tp():
    overrides = serve.serve_overrides(serve_args("--tp", "2"))
    assert (overrides["host"], overrides["tp_size"], overrides["api_key"]) == ("127.0.0.1", 2, None)


def test_serving_on_an_open_address_needs_an_api_key(capsys):
    with pytest.raises(ConfigError, match="needs an API key"):
        serve.serve_overrides(serve_args("--host", "0.0.0.0"))
    assert main(["serve", "--host", "0.0.0.0"]) == 1
    assert "needs an API key" in capsys.readouterr().err
    assert serve.serve_overrides(serve_args("--host", "0.0.0.0", "--api-key", "k"))["api_key"]


def test_doctor_report_gives_the_fix_only_for_failed_lines():
    report = ProofReport(
        "stack",
        (
            ProofLine("humming", "Humming", Verdict.PASS, "6/6 layers", "install it"),
            ProofLine("fp8_head", "FP8 head", Verdict.FAIL, "bfloat16", "run ling-chat"),
        ),
    )
    text = format_report(report)
    assert "PASS  Humming" in text and "install it" not in text
    assert "FAIL  FP8 head" in text and "fix: run ling-chat" in text
    assert text.endswith("refused to start")


@pytest.mark.parametrize("command", ["doctor", "serve"])
def test_a_missing_model_path_is_one_line_before_anything_loads(tmp_path, capsys, command):
    assert main([command, "--model", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "does not exist" in err


def test_serving_without_the_engine_extra_is_one_line(tmp_path, capsys, engine_not_installed):
    (tmp_path / "config.json").write_text("{}")
    assert main(["serve", "--model", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install 'ling-chat[engine]'" in err


def test_doctor_says_which_engine_packages_are_installed(monkeypatch):
    from importlib import metadata

    from app.commands import doctor

    def version_double(name: str) -> str:
        if name in ("sglang", "torch"):
            return {"sglang": "0.5.23", "torch": "2.14.1"}[name]
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(doctor.metadata, "version", version_double)
    monkeypatch.setattr(doctor.shutil, "which", lambda _: None)
    installed, nvcc = doctor.environment().splitlines()
    assert installed == (
        "installed: sglang 0.5.23 · sglang-kernel NOT INSTALLED · torch 2.14.1 · "
        "humming-kernels NOT INSTALLED · flashinfer-python NOT INSTALLED"
    )
    assert nvcc.startswith("nvcc: not on PATH")
