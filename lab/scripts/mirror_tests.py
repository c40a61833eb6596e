"""One-off (issue 41): move tests/ so that its folders mirror app/'s, with `git mv`.

    python lab/scripts/mirror_tests.py          # dry run: what would move, what is unplaced
    python lab/scripts/mirror_tests.py --apply  # move, fix paths and imports, then check

It moves the files of MOVES that exist (a missing one is named, not fatal), adds the
`__init__.py` of each new folder, carries a test file's snapshot folder with it, re-points
`Path(__file__)` paths by the change of depth, rewrites `tests.<old module>` imports in
tests/ and lab/ and the old paths where the repository names them (not lab/results/), and
names the test files it left where they are (another branch's new
ones: place them by hand, or add them to MOVES and run again). With --apply it ends with
`pytest --collect-only -q` and compares the count of tests with the one before.

Run it on a clean work tree, commit the result, and delete this script in that commit.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

_BACKEND = "tests/backend"
MOVES: dict[str, str] = {
    # app/backend/engine
    f"{_BACKEND}/test_boot_log.py": f"{_BACKEND}/engine/test_boot_log.py",
    f"{_BACKEND}/test_checkpoint_download.py": f"{_BACKEND}/engine/test_checkpoint_download.py",
    f"{_BACKEND}/test_download.py": f"{_BACKEND}/engine/test_download.py",
    f"{_BACKEND}/test_dspark_config.py": f"{_BACKEND}/engine/test_dspark_config.py",
    f"{_BACKEND}/test_engine_config.py": f"{_BACKEND}/engine/test_engine_config.py",
    f"{_BACKEND}/test_engine_local.py": f"{_BACKEND}/engine/test_engine_local.py",
    f"{_BACKEND}/test_engine_stream.py": f"{_BACKEND}/engine/test_engine_stream.py",
    f"{_BACKEND}/test_kernel_cache.py": f"{_BACKEND}/engine/test_kernel_cache.py",
    f"{_BACKEND}/test_load_progress.py": f"{_BACKEND}/engine/test_load_progress.py",
    f"{_BACKEND}/test_two_engines.py": f"{_BACKEND}/engine/test_two_engines.py",
    "tests/test_private_files.py": f"{_BACKEND}/engine/test_private_files.py",
    "tests/test_engine_double_world.py": f"{_BACKEND}/engine/test_engine_double_world.py",
    # app/backend/engine/patches
    f"{_BACKEND}/test_draft_shards.py": f"{_BACKEND}/engine/patches/test_draft_shards.py",
    f"{_BACKEND}/test_evidence.py": f"{_BACKEND}/engine/patches/test_evidence.py",
    f"{_BACKEND}/test_fp8_head.py": f"{_BACKEND}/engine/patches/test_fp8_head.py",
    f"{_BACKEND}/test_head_choice.py": f"{_BACKEND}/engine/patches/test_head_choice.py",
    f"{_BACKEND}/test_sharing.py": f"{_BACKEND}/engine/patches/test_sharing.py",
    # app/backend/engine/patches/host (the host levers' patches, and their judges' cases)
    **{
        f"{_BACKEND}/{name}": f"{_BACKEND}/engine/patches/host/{name}"
        for name in ("test_host_levers.py", "test_log_level.py", "test_prepared_commit.py")
    },
    # app/backend/checkpoint
    f"{_BACKEND}/test_checkpoint.py": f"{_BACKEND}/checkpoint/test_checkpoint.py",
    # app/backend/firststart
    f"{_BACKEND}/test_gpu_probe.py": f"{_BACKEND}/firststart/test_gpu_probe.py",
    f"{_BACKEND}/test_overrides.py": f"{_BACKEND}/firststart/test_overrides.py",
    f"{_BACKEND}/test_preflight.py": f"{_BACKEND}/firststart/test_preflight.py",
    f"{_BACKEND}/test_prepare.py": f"{_BACKEND}/firststart/test_prepare.py",
    # app/backend/proof
    f"{_BACKEND}/test_proof.py": f"{_BACKEND}/proof/test_proof.py",
    f"{_BACKEND}/test_proof_dspark.py": f"{_BACKEND}/proof/test_proof_dspark.py",
    f"{_BACKEND}/test_proof_graphs.py": f"{_BACKEND}/proof/test_proof_graphs.py",
    f"{_BACKEND}/test_proof_levers.py": f"{_BACKEND}/proof/test_proof_levers.py",
    f"{_BACKEND}/test_proof_lines.py": f"{_BACKEND}/proof/test_proof_lines.py",
    f"{_BACKEND}/test_proof_replayssm.py": f"{_BACKEND}/proof/test_proof_replayssm.py",
    # app/backend/remote
    f"{_BACKEND}/test_remote.py": f"{_BACKEND}/remote/test_remote.py",
    f"{_BACKEND}/test_remote_limits.py": f"{_BACKEND}/remote/test_remote_limits.py",
    f"{_BACKEND}/test_server.py": f"{_BACKEND}/remote/test_server.py",
    # app/backend/resident
    f"{_BACKEND}/test_resident.py": f"{_BACKEND}/resident/test_resident.py",
    f"{_BACKEND}/test_resident_keeper.py": f"{_BACKEND}/resident/test_resident_keeper.py",
    f"{_BACKEND}/test_resident_private.py": f"{_BACKEND}/resident/test_resident_private.py",
    # app/plumbing
    f"{_BACKEND}/test_signals.py": "tests/plumbing/test_signals.py",
    "tests/test_logfile.py": "tests/plumbing/test_logfile.py",
    # app/commands (the command line's commands, each through `main`)
    "tests/test_cli_engine_commands.py": "tests/commands/test_cli_engine_commands.py",
    "tests/test_cli_engine_resident.py": "tests/commands/test_cli_engine_resident.py",
    "tests/test_cli_history_export.py": "tests/commands/test_cli_history_export.py",
    "tests/test_cli_preflight.py": "tests/commands/test_cli_preflight.py",
    "tests/test_cli_profiles.py": "tests/commands/test_cli_profiles.py",
    "tests/test_damaged_history.py": "tests/commands/test_damaged_history.py",
    "tests/ui/test_chat_command.py": "tests/commands/test_chat_command.py",
    "tests/bench/test_command.py": "tests/commands/test_bench_command.py",
    "tests/bench/test_suite_command.py": "tests/commands/test_bench_suite_command.py",
    "tests/bench/test_bench_process.py": "tests/commands/test_bench_process.py",
    # app/bench
    "tests/bench/test_bandwidth.py": "tests/bench/bytemodel/test_bandwidth.py",
    "tests/bench/test_datasets.py": "tests/bench/inputs/test_datasets.py",
    "tests/bench/test_gsm8k.py": "tests/bench/inputs/test_gsm8k.py",
    "tests/bench/test_suites.py": "tests/bench/inputs/test_suites.py",
    "tests/bench/test_workloads.py": "tests/bench/inputs/test_workloads.py",
    "tests/bench/test_peer.py": "tests/bench/peer/test_peer.py",
}
"""Old path -> new path. Left where they are: tests/ui (app/ui, its fixtures in its
conftest), tests/storage, tests/telemetry, tests/bench's own modules, tests/backend's for
app/backend's top modules (draft, sglang_meta), and at the top the whole app and the
repository (test_app_*, test_cli_errors, test_settings, test_textsafe, test_layers,
test_readme, test_commands_doc, test_timeout_scale, test_known_answer_model)."""
STAY = {
    *(f"tests/{name}" for name in (
        "test_app_engine_double.py", "test_app_paste.py", "test_app_resident.py",
        "test_app_signals.py", "test_cli_errors.py", "test_settings.py", "test_textsafe.py",
        "test_layers.py", "test_readme.py", "test_commands_doc.py", "test_timeout_scale.py",
        "test_known_answer_model.py",
    )),
    f"{_BACKEND}/test_draft.py",
    f"{_BACKEND}/test_sglang_meta.py",
}  # fmt: skip
_PARENTS_N = re.compile(r"(Path\(__file__\)(?:\.resolve\(\))?\.parents\[)(\d+)(\])")
_PARENT_CHAIN = re.compile(r"(Path\(__file__\)(?:\.resolve\(\))?)((?:\.parent)+)(?![s\w])")


def git(*argv: str) -> str:
    return subprocess.run(
        ["git", *argv], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def module_of(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def repoint(text: str, delta: int) -> str:
    """`Path(__file__)` paths of a file that moved `delta` folders deeper."""
    text = _PARENTS_N.sub(lambda m: f"{m[1]}{int(m[2]) + delta}{m[3]}", text)

    def chain(match: re.Match[str]) -> str:
        ups = match[2].count(".parent") + delta
        return match[1] + ".parent" * ups

    return _PARENT_CHAIN.sub(chain, text)


def unplaced() -> list[str]:
    """Test files that neither move nor stay by name (a suggestion of where follows each)."""
    files = sorted(
        str(p.relative_to(ROOT))
        for p in TESTS.rglob("test_*.py")
        if "gpu" not in p.parts and "fixtures" not in p.parts
    )
    placed = set(MOVES) | set(MOVES.values()) | STAY
    return [f for f in files if f not in placed and not f.startswith(("tests/ui/", "tests/storage/",
            "tests/telemetry/", "tests/bench/"))]  # fmt: skip


def suggest(path: str) -> str:
    """The app package `path` imports most, as a folder under tests/."""
    counts: dict[str, int] = {}
    for found in re.findall(r"^\s*from (app(?:\.\w+)*) import", (ROOT / path).read_text(), re.M):
        parts = found.split(".")[1:3]
        if parts and (ROOT / "app" / "/".join(parts)).is_dir():
            key = "/".join(parts)
        elif parts and (ROOT / "app" / parts[0]).is_dir():
            key = parts[0]
        else:
            key = ""
        counts[key] = counts.get(key, 0) + 1
    best = max(counts, key=counts.__getitem__) if counts else ""
    return f"tests/{best}/" if best else "tests/"


def collected() -> int:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return sum(1 for line in out.splitlines() if "::" in line)


def apply(moves: dict[str, str]) -> None:
    before = collected()
    for old, new in moves.items():
        target = ROOT / new
        for folder in reversed(target.relative_to(TESTS).parents):
            init = TESTS / folder / "__init__.py"
            if not init.exists():
                init.parent.mkdir(exist_ok=True)
                init.touch()
                git("add", str(init.relative_to(ROOT)))
        git("mv", old, new)
        snapshots = (ROOT / old).parent / "__snapshots__" / Path(old).stem
        if snapshots.is_dir():
            (target.parent / "__snapshots__").mkdir(exist_ok=True)
            git("mv", str(snapshots.relative_to(ROOT)),
                str((target.parent / "__snapshots__" / target.stem).relative_to(ROOT)))  # fmt: skip
        delta = len(Path(new).parts) - len(Path(old).parts)
        if delta:
            target.write_text(repoint(target.read_text(), delta))
    renamed = {module_of(old): module_of(new) for old, new in moves.items()}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renamed)) + r")\b")
    for path in [*TESTS.rglob("*.py"), *(ROOT / "lab").rglob("*.py")]:
        text = path.read_text()
        if (changed := pattern.sub(lambda m: renamed[m[1]], text)) != text:
            path.write_text(changed)
    mentions = re.compile("|".join(re.escape(old) for old in moves))
    for name in git("ls-files").splitlines():
        path = ROOT / name
        if name.startswith("lab/results/") or path.suffix not in {".py", ".md", ".sh", ".toml"}:
            continue  # dated results name the files as they were
        if path == Path(__file__).resolve():
            continue
        text = path.read_text()
        if (changed := mentions.sub(lambda m: moves[m[0]], text)) != text:
            path.write_text(changed)
    after = collected()
    print(f"tests collected: {before} before, {after} after")
    if after != before:
        sys.exit("the count changed: look at `pytest --collect-only -q` before committing")
    lint = [sys.executable, "-m", "ruff", "check", "--output-format", "concise", "tests", "docs"]
    print(subprocess.run(lint, cwd=ROOT, capture_output=True, text=True).stdout.strip())
    print("fix what ruff names (a comment that grew past 100 columns), then commit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apply", action="store_true", help="move (default: say what)")
    args = parser.parse_args()
    if args.apply and git("status", "--porcelain", "tests", "lab"):
        sys.exit("tests/ or lab/ has changes: commit them first")
    moves = {old: new for old, new in MOVES.items() if (ROOT / old).exists()}
    for old in sorted(set(MOVES) - set(moves)):
        print(f"gone already: {old}")
    for old, new in moves.items():
        print(f"{old} -> {new}")
    for path in unplaced():
        print(f"left in place, not in MOVES: {path} (it imports most from {suggest(path)})")
    if args.apply:
        apply(moves)


if __name__ == "__main__":
    main()
