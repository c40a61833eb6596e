#!/usr/bin/env bash
# One poll of the background agenda on the GPU machine (tests/gpu/README.md):
#
#   bash scripts/gpu_poll.sh SECONDS
#
# Waits up to SECONDS, returning as soon as the agenda has printed its last line, prints the
# end of /root/agenda.log, and packs everything the agenda wrote so far (/root/results, and
# the log) into $OUT/results.tgz: one file, so the 8-files limit of a call never drops one,
# and cumulative, so the last poll that came back holds it all. The kernel caches' pieces
# (step `caches`) stay out of it, which they would push past what a call brings back; a
# call of their own fetches them: cp /root/results/cache.tgz.part-* "$OUT"/.
# The agenda writes to /root/results, not to the call's $OUT, which each call empties.
set -u
end=$((SECONDS + ${1:-0}))
until grep -q "^== agenda done" /root/agenda.log 2>/dev/null || ((SECONDS >= end)); do
  sleep 5
done
tail -c 8000 /root/agenda.log 2>/dev/null | grep -v "^\s*$"
tar czf "$OUT/results.tgz" -C /root --exclude="cache.tgz.part-*" results agenda.log 2>/dev/null
ls -la "$OUT/results.tgz"
