#!/usr/bin/env bash
# One poll of the background agenda on the GPU machine (lab/gpu.md):
#
#   bash lab/scripts/gpu_poll.sh SECONDS
#
# Waits up to SECONDS, returning as soon as the agenda has printed its last line or when no
# agenda runs (one that never started, after a failed install, costs no wait), prints the
# end of /root/agenda.log, and packs everything the agenda wrote so far (/root/results, and
# the log) into $OUT/results.tgz: one file, so the 8-files limit of a call never drops one,
# and cumulative, so the last poll that came back holds it all. The kernel caches' pieces
# (step `caches`) stay out of it, which they would push past what a call brings back; a
# call of their own fetches them: cp /root/results/cache.tgz.part-* "$OUT"/.
# The agenda writes to /root/results, not to the call's $OUT, which each call empties.
set -u
end=$((SECONDS + ${1:-0}))
until grep -q "^== agenda done" /root/agenda.log 2>/dev/null || ((SECONDS >= end)); do
  # The agenda writes its pid first thing; none after 10 s, or a dead one, is no agenda.
  if ((SECONDS >= 10)) && ! kill -0 "$(cat /root/agenda.pid 2>/dev/null)" 2>/dev/null; then
    echo "no agenda is running (/root/install.log and /root/agenda.log say why)"
    tail -n 5 /root/install.log 2>/dev/null
    break
  fi
  sleep 5
done
tail -c 8000 /root/agenda.log 2>/dev/null | grep -v "^\s*$"
tar czf "$OUT/results.tgz" -C /root --exclude="cache.tgz.part-*" results agenda.log 2>/dev/null
ls -la "$OUT/results.tgz"
