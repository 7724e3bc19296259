#!/bin/sh
# kubespray-mgmt-effect: reads
# Which run "kubespray-mgmt log" shows (mgmt_driver/remote/detached.py).
#   run-show WS [STEM]
# Prints KR:STEM:<STEM>, the last run's run.info as KR:INFO: lines,
# KR:NORUN, or KR:NOWS when there is no workspace.
. lib/ws_guard.sh
ws_guard check "$1" || exit 97
cd -- "$1" 2>/dev/null || { echo KR:NOWS; exit 0; }
if [ -n "$2" ]; then echo "KR:STEM:$2"
elif [ -f run.info ]; then head -c 4096 run.info | sed 's/^/KR:INFO:/'
else echo KR:NORUN; fi
