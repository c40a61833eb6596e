#!/usr/bin/env bash
# One poll of the background agenda on the GPU machine (tests/gpu/README.md):
#
#   bash scripts/gpu_poll.sh SECONDS
#
# Sleeps SECONDS, prints the end of /root/agenda.log, and packs everything the agenda wrote
# so far (/root/results, and the log) into $OUT/results.tgz: one file, so the 8-files limit
# of a call never drops one, and cumulative, so the last poll that came back holds it all.
# The agenda writes to /root/results, not to the call's $OUT, which each call empties.
set -u
sleep "${1:-0}"
tail -c 8000 /root/agenda.log 2>/dev/null | grep -v "^\s*$"
tar czf "$OUT/results.tgz" -C /root results agenda.log 2>/dev/null
ls -la "$OUT/results.tgz"
