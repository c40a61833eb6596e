"""How long `ling-chat import` takes for many small conversations, and its peak memory.

Builds a one-conversation history through `ChatStore` (a question and a measured reply),
exports it through the real CLI, copies that conversation N times with distinct titles and
times (JSONL: one line each; JSON: one document), then imports each file through the real
CLI (`python -m app import FILE`, its own process) into a fresh SQLite history and prints
the wall time, the child's CPU time (what it needs, however busy the machine), its peak RSS
and what the CLI said, with the load average before each run. A second import of the same file
(everything skipped) measures the duplicate check alone.

    python lab/scripts/import_bench.py                 # 100,000 conversations, JSONL and JSON
    python lab/scripts/import_bench.py --count 10000 --formats jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.core.reply_usage import ReplyUsage
from app.storage import ChatStore, MessageStatus
from app.telemetry import reply_stats

ROOT = Path(__file__).resolve().parents[2]


def seed(data_dir: Path) -> None:
    """A history of one conversation: a question and a measured reply."""
    with ChatStore.open(data_dir / "history.db") as store:
        run = store.record_engine_run(
            kind="engine",
            model="Ling-3.0-flash",
            sglang_version="0.5.23",
            profile="stack",
            proof={},
        )
        chat = store.create_conversation("seed")
        store.add_user_message(chat.id, "How long do I boil spaghetti?")
        writer = store.start_reply(chat.id, engine_run_id=run)
        writer.append(answer="About 9 minutes, then taste one.", reasoning="Dried pasta.")
        usage = ReplyUsage(completion_tokens=12, prompt_tokens=30, verify_rounds=4)
        writer.finish(MessageStatus.COMPLETE, reply_stats(0.0, [0.1], usage, 0.5))


PEAK = """
import atexit, sys
from app.cli import main

def peak():  # VmHWM: this process's own peak, not the forking parent's (as ru_maxrss is)
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print(f"peak RSS {kib >> 10} MiB", file=sys.stderr)

atexit.register(peak)
sys.exit(main(sys.argv[1:]))
"""
"""`ling-chat ARGV` as `python -m app` runs it (`app.cli.main`), saying its peak RSS at exit."""


def cli(data_dir: Path, *argv: str) -> tuple[float, float, int, str]:
    """Run `ling-chat ARGV` in its own process: (wall seconds, its CPU seconds, its peak RSS
    in MiB, output)."""
    env = {**os.environ, "LING_CHAT_DATA_DIR": str(data_dir), "LING_CHAT_CONFIG": os.devnull}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PEAK, *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # this child's CPU, once it ended
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    said, _, peak = (done.stdout + done.stderr).strip().rpartition("peak RSS ")
    if done.returncode != 0:
        raise SystemExit(f"ling-chat {' '.join(argv)} failed ({done.returncode}): {said}")
    return seconds, cpu, int(peak.split()[0]), said.strip()


def many(seed_dir: Path, work: Path, fmt: str, count: int) -> Path:
    """The seed's export with its conversation copied `count` times (distinct keys), written
    a conversation at a time."""
    exported = work / f"seed.{fmt}"
    cli(seed_dir, "export", "-o", str(exported))
    out = work / f"many.{fmt}"
    with out.open("w", encoding="utf-8") as file:
        if fmt == "jsonl":
            line = json.loads(exported.read_text(encoding="utf-8"))
            for i in range(count):
                line["conversation"].update(_key(i))
                file.write(json.dumps(line, ensure_ascii=False) + "\n")
            return out
        document = json.loads(exported.read_text(encoding="utf-8"))
        (template,) = document.pop("conversations")
        file.write(
            json.dumps(document, ensure_ascii=False, indent=2)[:-2] + ',\n  "conversations": ['
        )
        for i in range(count):
            record = json.dumps({**template, **_key(i)}, ensure_ascii=False, indent=2)
            file.write(("," if i else "") + "\n" + record)
        file.write("\n  ]\n}\n")
    return out


def _key(i: int) -> dict[str, str]:
    """A distinct title and creation time: the import's duplicate key."""
    return {"title": f"chat {i}", "created_at": f"2026-01-01T00:00:00.{i:06d}+00:00"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--formats", nargs="+", default=["jsonl", "json"])
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} · {os.cpu_count()} CPUs · {args.count:,} conversations")
    with tempfile.TemporaryDirectory(prefix="import-bench-") as temp:
        work = Path(temp)
        seed(work / "seed")
        for fmt in args.formats:
            source = many(work / "seed", work, fmt, args.count)
            target = work / f"history-{fmt}"
            size = source.stat().st_size / (1 << 20)
            for attempt in ("first import", "again (all skipped)"):
                load = os.getloadavg()[0]
                seconds, cpu, peak, said = cli(target, "import", str(source))
                last = said.splitlines()[-1] if said else ""
                print(
                    f"{fmt:5} {size:6.1f} MiB  {attempt:20} wall {seconds:6.1f} s  CPU {cpu:6.1f} s"
                    f"  peak RSS {peak} MiB  (load {load:.1f} before)  | {last}"
                )


if __name__ == "__main__":
    main()
