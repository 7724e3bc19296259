#!/bin/sh
# kubespray-mgmt-effect: changes
# Stop the run holding the workspace's lock, then delete the workspace.
#   remove-workspace WS
# Prints KR:STOPPED:<pid>, or KR:NOTOURS:<pid> when run.info's pid is not
# that run (mgmt_driver/remote/kubespray.py, Workspace.remove).
. lib/ws_guard.sh
ws_guard check "$1" || exit 97
. lib/is_run.sh
if [ -f "$1/run.info" ] && command -v flock >/dev/null 2>&1 &&
   ! ( flock -n 9 ) 9>>"$1/run.lock"; then
  pid=$(sed -n 's/^pid=\([0-9][0-9]*\)$/\1/p' "$1/run.info" | head -n 1)
  stem=$(sed -n 's/^stem=//p' "$1/run.info" | head -n 1)
  case $stem in ''|*[!A-Za-z0-9_.-]*) stem= ;; esac
  if [ -n "$pid" ] && [ -n "$stem" ] &&
     is_run "$pid" "$1/logs/$stem.rc"; then
    pkill -KILL -s "$pid" || kill -KILL -- "-$pid"
    echo "KR:STOPPED:$pid"
  elif [ -n "$pid" ]; then
    echo "KR:NOTOURS:$pid"
  fi
fi 2>/dev/null
rm -rf -- "$1"
