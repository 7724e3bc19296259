#!/bin/sh
# kubespray-mgmt-effect: reads
# Follow a detached playbook run (mgmt_driver/remote/detached.py).
#   run-follow WS STEM LINE PID
# Prints the log of run STEM from line LINE until process PID ends (PID
# 0: prints what is there and stops); exit 93: no such log.
. lib/ws_guard.sh
ws_guard check "$1" || exit 97
cd -- "$1" && [ -f "logs/$2.log" ] || exit 93
if [ "$4" = 0 ] || [ -f "logs/$2.rc" ] || ! kill -0 "$4" 2>/dev/null; then
  exec tail -n "+$3" -- "logs/$2.log"
fi
exec tail -n "+$3" -s 0.2 -f --pid="$4" -- "logs/$2.log"
