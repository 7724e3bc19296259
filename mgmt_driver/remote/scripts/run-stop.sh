#!/bin/sh
# kubespray-mgmt-effect: changes
# Stop a detached playbook run, its whole session (mgmt_driver/remote/detached.py).
#   run-stop WS STEM PID
# Only the run STEM whose pid run.info records; KR:NOTOURS:<pid> when
# that process is not the run any more.
. lib/ws_guard.sh
ws_guard check "$1" || exit 97
cd -- "$1" || exit 0
[ -f "logs/$2.rc" ] && exit 0
grep -qx "pid=$3" run.info || exit 0
. lib/is_run.sh
is_run "$3" "$1/logs/$2.rc" || { echo "KR:NOTOURS:$3"; exit 0; }
pkill -TERM -s "$3" || kill -TERM -- "-$3"
sleep 5
pkill -KILL -s "$3" || kill -KILL -- "-$3"
exit 0
