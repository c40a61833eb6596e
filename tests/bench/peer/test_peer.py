"""`bench --peer stock-sglang`: the stock server's command line, and its row beside ling-chat's
profiles, measured end to end against a double of the stock server (a real HTTP process)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from app.backend.engine.config import GpuFacts
from app.backend.resident import process
from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.bench.peer import recipe, server
from app.bench.peer.recipe import PEER, PeerLaunch, peer_refusal
from app.bench.results import BenchRun
from app.commands import bench
from app.core.errors import ConfigError
from tests.support.bench_cli import bench_main
from tests.support.bench_doubles import PacedEngineDouble, ScriptedEngineDouble, sample
from tests.support.resident import wait_until
from tests.support.timeouts import scaled

DOUBLE = Path(__file__).parent.parent.parent / "fixtures" / "stock_sglang_double.py"
H200 = GpuFacts(sm=90, has_fa3=False, has_flashinfer=True, has_xgrammar=True)
SPARK = GpuFacts(sm=121, has_fa3=False, has_flashinfer=True, has_xgrammar=True)
SMALL = ["--input-len", "8", "--output-len", "30", "--num-prompts", "2", "--reps", "1"]
STACK_REPLY = sample(ttft=0.05, tpot=0.02, tokens=30, verify_rounds=8)
"""ling-chat's rows: 50 tok/s at accept 3.75."""


def _flags(argv: list[str]) -> dict[str, str | None]:
    """`--flag value` and bare `--flag` pairs of a command line."""
    flags: dict[str, str | None] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            following = argv[i + 1] if i + 1 < len(argv) else "--"
            flags[arg] = None if following.startswith("--") else following
    return flags


def test_on_the_spark_the_stock_server_gets_the_recipe_flags_as_written() -> None:
    launch = PeerLaunch("/ckpt", 0.65, None, SPARK)
    argv = launch.argv(4321)
    assert argv[:3] == [sys.executable, "-m", "sglang.launch_server"]
    flags = _flags(argv)
    assert {flag: flags[flag] for flag, _ in recipe.RECIPE_FLAGS} == dict(recipe.RECIPE_FLAGS)
    assert flags["--model-path"] == flags["--speculative-draft-model-path"] == "/ckpt"
    assert flags["--port"] == "4321"
    assert flags["--mem-fraction-static"] == "0.65" and "--context-length" not in flags
    # Stock SGLang: none of ling-chat's levers beyond the recipe's.
    assert not {"--enable-linear-replayssm-spec", "--enable-fp32-lm-head"} & set(flags)
    assert launch.translations() == []
    assert launch.label("0.5.23") == (
        "stock SGLang's server, the official Spark recipe's flags (SGLang 0.5.23: BF16 head,"
        " weight-only head sharing, recurrent verify)"
    )


def test_on_the_h200_the_label_names_each_flag_this_machine_changes() -> None:
    launch = PeerLaunch("/ckpt", 0.65, 8192, H200)
    flags = _flags(launch.argv(1))
    assert flags["--attention-backend"] == "triton"  # ling-chat's own sm_90 choice, no FA3
    assert "--fp8-gemm-backend" not in flags  # SGLang refuses cutlass off sm_12x
    assert flags["--context-length"] == "8192"
    assert launch.label("0.5.23").endswith(
        "; on sm_90: attention triton, not flashinfer, FP8 GEMM auto, not cutlass"
    )


def test_the_label_says_which_sglang_args_the_stock_server_did_not_take() -> None:
    launch = PeerLaunch("/ckpt", 0.65, None, SPARK, ("attention_backend", "page_size"))
    flags = _flags(launch.argv(1))
    assert flags["--attention-backend"] == "flashinfer" and flags["--page-size"] == "64"
    assert launch.label("0.5.23").endswith(
        "; on sm_121: --sglang-arg attention_backend, page_size not applied to it"
    )


def test_the_stock_server_never_sees_ling_chats_patch_plan() -> None:
    env = PeerLaunch("/ckpt", 0.65, None, H200).environment(
        {"LING_CHAT_PATCH_PLAN": "{}", "SGLANG_LOGGING_CONFIG_PATH": "/x", "HOME": "/h"}
    )
    assert "LING_CHAT_PATCH_PLAN" not in env and "SGLANG_LOGGING_CONFIG_PATH" not in env
    assert env["HOME"] == "/h" and env["HUMMING_COMPILER"] == "nvrtc"  # the recipe's


def test_the_peer_needs_real_weights(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert "holds no *.safetensors (config only)" in str(peer_refusal(str(tmp_path), {}, {}))
    (tmp_path / "model-00001-of-00001.safetensors").write_bytes(b"")
    assert peer_refusal(str(tmp_path), {}, {}) is None
    assert "drop --sglang-arg load_format=dummy" in str(
        peer_refusal(str(tmp_path), {"load_format": "dummy"}, {})
    )


def test_the_peer_refuses_a_variable_its_row_could_not_name(tmp_path: Path) -> None:
    """Stock SGLang would fake its acceptance with no proof to say so, where ling-chat's
    rows are labelled simulated."""
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert peer_refusal(str(tmp_path), {}, {"SGLANG_SIMULATE_ACC_LEN": ""}) is None  # unset
    problem = peer_refusal(str(tmp_path), {}, {"SGLANG_SIMULATE_ACC_LEN": "2.68"})
    assert problem == "--peer stock-sglang has no proof to show SGLANG_SIMULATE_ACC_LEN: unset it"


LEAKED = "SGLANG_MAMBA_SSM_DTYPE"
"""What SGLang's in-process resolution sets in this process for the stack's ReplaySSM."""


class _EngineModule(types.ModuleType):
    """Stands in for app.bench.engine: ling-chat's profiles are scripted engine doubles, each
    setting in this process what SGLang's in-process engine sets."""

    def __init__(self, paced: bool = False) -> None:
        super().__init__("app.bench.engine")
        self.journal: list[str] = []
        self.paced = paced
        """Engines that answer each request at its length (PacedEngineDouble)."""

    def bench_engine_factory(self, config: Any, *, require_proof: bool = True) -> Any:
        async def start(name: str) -> ScriptedEngineDouble:
            self.journal.append(f"start {name}")
            os.environ[LEAKED] = "float32"
            facts = {"config": {}, "proof": None, "model_config": LING_3_FLASH_CONFIG}
            if self.paced:
                return PacedEngineDouble(name, [], self.journal, facts=facts)
            return ScriptedEngineDouble(name, [STACK_REPLY] * 3, self.journal, facts=facts)

        return start


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A checkpoint folder with a weights file (the double never reads it)."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LING_3_FLASH_CONFIG))
    (folder / "model-00001-of-00001.safetensors").write_bytes(b"")
    return folder


@pytest.fixture
def record(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """ling-chat's profiles as doubles, the stock server as its double; what it records."""
    monkeypatch.setitem(sys.modules, "app.bench.engine", _EngineModule())
    monkeypatch.setattr(bench, "prepare_engines", lambda plan, configs: None)
    monkeypatch.setattr(bench, "fetch_model", lambda model_path: model_path)
    monkeypatch.setattr(bench, "gpu_facts", lambda: H200)
    monkeypatch.setattr(recipe, "PEER_COMMAND", [sys.executable, str(DOUBLE)])
    monkeypatch.setattr(server, "STOP_GRACE_S", 5.0)
    path = tmp_path / "double.json"
    monkeypatch.setenv("STOCK_SGLANG_DOUBLE_RECORD", str(path))
    monkeypatch.setenv("LING_CHAT_PATCH_PLAN", '{"left": "by an in-process engine"}')
    monkeypatch.setenv(LEAKED, "")  # restored to unset after the test
    monkeypatch.delenv(LEAKED)
    return path


def _no_process_left(record: Path) -> None:
    facts = json.loads(record.read_text())
    assert not process.alive(facts["pid"]) and not process.alive(facts["child"])
    assert process.group(facts["pid"]) == []


def test_the_peer_row_and_its_ratio_appear_in_the_same_run(
    end_to_end: None, record: Path, model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    argv = [*SMALL, "--profiles", "humming,stack", "--peer", PEER, "--model", str(model)]
    assert bench_main([*argv, "--json", str(out)]) == 0

    stdout, stderr = capsys.readouterr()
    row = next(line for line in stdout.splitlines() if line.startswith("stock-sglang (peer)"))
    assert row.split()[2] == "peer"
    assert "stock-sglang (peer): stock SGLang's server, the official Spark recipe's flags" in stdout
    assert "on sm_90: attention triton, not flashinfer" in stdout
    ratio = next(line for line in stdout.splitlines() if "x stack's decode tok/s" in line)
    assert ", accept 3.00 against 3.75" in ratio
    assert "stock-sglang: starting the engine" in stderr
    facts = json.loads(record.read_text())
    assert facts["env"] == {"LING_CHAT_PATCH_PLAN": None, "HUMMING_COMPILER": "nvrtc", LEAKED: None}
    assert os.environ[LEAKED] == "float32"  # set in this process, not handed on
    assert _flags(facts["argv"])["--model-path"] == str(model)
    _no_process_left(record)
    log = Path(os.environ["LING_CHAT_DATA_DIR"]) / "logs" / "stock-sglang.log"
    assert "double: listening on" in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600

    run = BenchRun.from_dict(json.loads(out.read_text()))
    assert [p.profile for p in run.profiles] == ["humming", "stack", PEER]
    assert run.plan["peer"] == PEER
    peer = run.profiles[2]
    assert peer.engine["sglang"] == "0.5.23" and peer.engine["argv"][2:] == facts["argv"]
    summary = peer.workloads[0].summary
    assert summary.errors == 0 and summary.accept_length == 3.0
    table = json.loads(out.read_text())["tables"]["synthetic"][2]
    assert table["peer_ratio"]["to"] == "stack"
    assert table["peer_ratio"]["decode_tps"] == pytest.approx(summary.decode_tps / 50.0)
    assert f"{table['peer_ratio']['decode_tps']:.2f}x stack's" in ratio


def test_boots_interleave_stack_and_stock_with_singles_last_and_each_has_its_host_time(
    end_to_end: None,
    record: Path,
    model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engines = _EngineModule(paced=True)
    monkeypatch.setitem(sys.modules, "app.bench.engine", engines)
    out = tmp_path / "run.json"
    argv = [*SMALL, "--profiles", "stack,stack-recurrent", "--peer", PEER, "--model", str(model)]
    argv += ["--boots", "2,stack-recurrent=1", "--host-time", "--json", str(out)]
    assert bench_main(argv) == 0

    stdout, stderr = capsys.readouterr()
    starts = [line.split(":")[0] for line in stderr.splitlines() if "starting the engine" in line]
    assert starts == [
        "stack (boot 1/2)", "stock-sglang (boot 1/2)", "stack (boot 2/2)",
        "stock-sglang (boot 2/2)", "stack-recurrent",
    ]  # fmt: skip
    assert "stack-recurrent: boot 5/5 done at" in stderr and "about 0 s left" in stderr
    data = json.loads(out.read_text())
    assert data["plan"]["boots"] == {"stack-recurrent": 1, "default": 2}
    run = BenchRun.from_dict(data)
    assert [p.profile for p in run.profiles] == ["stack", "stack-recurrent", PEER]
    stack, recurrent, peer = (p.host for p in run.profiles)
    assert stack is not None and recurrent is not None and peer is not None
    assert [len(h.boots) for h in (stack, recurrent, peer)] == [2, 1, 2]
    # the paced double: 16 and 256 tokens, 4 a round, 2 ms a token; 100 us of GPU a token
    assert stack.wall_ms == pytest.approx(8.0) and stack.gpu_busy_ms == pytest.approx(0.4)
    assert stack.idle_ms == pytest.approx(7.6)
    assert [b.gpu_busy_ms is not None for b in stack.boots] == [True, False]  # first boot only
    # the stock double over HTTP: 3 tokens a round (6 and 86 rounds), really 2 ms a token
    assert peer.gpu_busy_ms == pytest.approx(0.3)
    assert all(b.error is None and b.rounds == 80 for b in peer.boots)
    assert peer.wall_ms is not None and peer.wall_ms > 0
    assert data["profiles"][2]["host_time"]["wall_ms_boots"] == peer.walls
    table = data["tables"]["synthetic"][2]
    assert len(table["boot_decode_tps"]) == 2 and table["boot_median_tps"] is not None
    assert "stock-sglang: by boot medians" in stdout
    host_lines = [line for line in stdout.splitlines() if line.startswith(("stack ", PEER))]
    assert any("8.000 (8.000-8.000)" in line and "0.400" in line for line in host_lines)
    split = {row["engine"]: row for row in data["host_time"]}
    assert split["stack"]["wall_ms_vs_above"] is None  # the first row
    assert split[PEER]["gpu_busy_ms_vs_above"] == pytest.approx(0.3 - 0.4)
    assert split[PEER]["wall_ms_vs_above"] == pytest.approx(peer.wall_ms - 8.0)
    _no_process_left(record)


def test_a_boot_count_for_an_engine_not_run_is_refused_before_anything_starts(
    record: Path, model: Path
) -> None:
    argv = [*SMALL, "--profiles", "stack", "--model", str(model), "--boots", "3,humming=1"]
    with pytest.raises(ConfigError, match="--boots names humming, not run here"):
        bench_main(argv)
    assert not record.exists()


def test_a_server_that_never_becomes_healthy_is_one_line_and_stopped(
    end_to_end: None,
    record: Path,
    model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("STOCK_SGLANG_DOUBLE", "never-healthy")
    argv = [*SMALL, "--profiles", "stack", "--peer", PEER, "--peer-wait", "1"]
    assert bench_main([*argv, "--model", str(model)]) == 1
    stdout = capsys.readouterr().out
    error = next(line for line in stdout.splitlines() if line.startswith("stock-sglang: "))
    assert "stock SGLang's server was not healthy within 1 s (--peer-wait); stopped it" in error
    assert "stock-sglang.log" in error
    _no_process_left(record)


def test_a_server_that_exits_while_starting_is_one_line_with_its_cause(
    end_to_end: None,
    record: Path,
    model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("STOCK_SGLANG_DOUBLE", "refuse")
    assert bench_main([*SMALL, "--profiles", "stack", "--peer", PEER, "--model", str(model)]) == 1
    error = next(line for line in capsys.readouterr().out.splitlines() if " exited " in line)
    assert "exited while starting with status 2: launch_server: error: unrecognized" in error
    assert error.startswith("stock-sglang: stock SGLang's server (pid ")


def test_a_server_that_dies_mid_run_fails_its_requests_and_leaves_nothing(
    end_to_end: None,
    record: Path,
    model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("STOCK_SGLANG_DOUBLE", "die-after=2")  # the warm-up and one request
    argv = [*SMALL, "--profiles", "stack", "--peer", PEER]
    assert bench_main([*argv, "--model", str(model)]) == 1
    stdout, stderr = capsys.readouterr()
    died = "stock SGLang's server (pid {}) exited mid-run with status 7: double: the scheduler died"
    pid = json.loads(record.read_text())["pid"]
    assert died.format(pid) in stderr
    row = next(line for line in stdout.splitlines() if line.startswith("stock-sglang (peer)"))
    assert row.split()[-2:] == ["1", "—"]  # one failed request of two
    _no_process_left(record)  # its scheduler double, left behind, stopped with its group


class _TokenizerDouble:
    """Stands in for the model's tokenizer: renders the chat template's arguments visibly."""

    loaded_from: list[str] = []

    @classmethod
    def from_pretrained(cls, path: str) -> _TokenizerDouble:
        cls.loaded_from.append(path)
        return cls()

    def apply_chat_template(self, messages: list[dict[str, str]], **kwargs: Any) -> str:
        assert kwargs["tokenize"] is False and kwargs["add_generation_prompt"] is True
        message = messages[0]
        return f"<{message['role']}> {message['content']} thinking={kwargs['enable_thinking']}"


async def test_a_chat_prompt_is_rendered_by_the_models_template_before_it_is_sent(
    end_to_end: None, record: Path, model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transformers = types.ModuleType("transformers")
    transformers.AutoTokenizer = _TokenizerDouble  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    monkeypatch.setattr(_TokenizerDouble, "loaded_from", [])
    launch = PeerLaunch(str(model), 0.65, None, H200)
    start = server.peer_factory(
        launch, log_file=tmp_path / "peer.log", wait_s=10, inherited=os.environ
    )
    engine = await start(PEER)
    try:
        for _ in range(2):
            reply = await engine.generate(
                input_ids=None,
                prompt="What is 2 + 2?",
                sampling_params={"max_new_tokens": 6},
                chat_template={"enable_thinking": False},
            )
            # The double counts the words of the text it was sent: "<user> What is 2 + 2?
            # thinking=False", the rendered prompt.
            assert reply.usage.prompt_tokens == 7
            assert (reply.usage.completion_tokens, reply.usage.verify_rounds) == (6, 2)
    finally:
        await engine.shutdown()
    assert _TokenizerDouble.loaded_from == [str(model)]  # loaded once
    _no_process_left(record)


@pytest.mark.parametrize(
    ("extra", "cause"),
    [
        (["--sglang-arg", "load_format=dummy"], "drop --sglang-arg load_format=dummy"),
        ([], "holds no *.safetensors (config only)"),
    ],
)
def test_the_peer_is_refused_on_a_model_without_real_weights(
    record: Path, tmp_path: Path, extra: list[str], cause: str
) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    if extra:  # weights on disk, but SGLang told to make up its own
        (folder / "model.safetensors").write_bytes(b"")
    argv = [*SMALL, "--peer", PEER, "--model", str(folder), *extra]
    with pytest.raises(ConfigError) as refused:
        bench_main(argv)
    assert cause in str(refused.value)
    assert not record.exists()  # nothing started


@pytest.mark.parametrize("mode", ["never-healthy", "ok"])
def test_ctrl_c_stops_the_stock_server_with_its_group(
    end_to_end: None, mode: str, model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted while the server loads, or mid-reply: bench exits 130, nothing left."""
    record = tmp_path / "double.json"
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root), "STOCK_SGLANG_DOUBLE": mode}
    env["STOCK_SGLANG_DOUBLE_RECORD"] = str(record)
    argv = [*SMALL, "--output-len", "20000", "--profiles", "stack", "--peer", PEER]
    session = root / "tests" / "fixtures" / "peer_bench_session.py"
    child = subprocess.Popen(
        [sys.executable, str(session), *argv, "--model", str(model)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(record.exists, 30), "the stock server double never started"
        time.sleep(1.0)  # loading (503), or mid-way through its first reply (about 40 s long)
        child.send_signal(signal.SIGINT)
        _out, err = child.communicate(timeout=scaled(60))
    finally:
        child.kill()
    assert child.returncode == 130, err[-2000:]
    _no_process_left(record)


def test_bench_refuses_the_peer_before_anything_starts_when_acceptance_is_faked(
    record: Path, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "2.68")
    with pytest.raises(ConfigError) as refused:
        bench_main([*SMALL, "--profiles", "stack", "--peer", PEER, "--model", str(model)])
    assert "no proof to show SGLANG_SIMULATE_ACC_LEN" in str(refused.value)
    assert not record.exists()  # nothing started
