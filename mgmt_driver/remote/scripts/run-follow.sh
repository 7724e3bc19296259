#!/bin/sh
# kubespray-mgmt-effect: reads
# Follow a detached playbook run (mgmt_driver/remote/detached.py).
#   run-follow WS STEM LINE PID
# Prints the log of run STEM from line LINE until the run ends (PID 0:
# prints what is there and stops); exit 93: no such log.
. lib/ws_guard.sh
ws_guard check "$1" || exit 97
cd -- "$1" && [ -f "logs/$2.log" ] || exit 93
if [ "$4" = 0 ] || [ -f "logs/$2.rc" ] || ! kill -0 "$4" 2>/dev/null; then
  exec tail -n "+$3" -- "logs/$2.log"
fi
# The run has ended when its exit status is written, the last thing its
# process PID does: that process is an orphan, and its zombie answers
# kill -0 until the server's PID 1 reaps it (seconds late, or never, in
# a container with a minimal init).  So tail follows a watcher of the
# status file instead, a child of this shell, reaped at once; after it
# ends tail still prints the rest of the log.
while [ ! -f "logs/$2.rc" ] && kill -0 "$4" 2>/dev/null; do
  sleep 0.2
done &
watcher=$!
tail -n "+$3" -s 0.2 -f --pid="$watcher" -- "logs/$2.log"
code=$?
kill "$watcher" 2>/dev/null
exit "$code"
