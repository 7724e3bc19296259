#!/bin/sh
# kubespray-mgmt-effect: changes
# Stop the run holding the workspace's lock, close the SSH master
# connections Ansible keeps for the workspace, then delete the workspace.
#   remove-workspace WS [CPDIR SECONDS]
# CPDIR is the workspace's control path directory
# (mgmt_driver/remote/isolation.py, control_path_dir; "~/" is the home
# directory), SECONDS the bound of one "ssh -O exit".
# Prints KR:STOPPED:<pid>, or KR:NOTOURS:<pid> when run.info's pid is not
# that run (mgmt_driver/remote/kubespray.py, Workspace.remove); then
# KR:MASTERS:<closed>, and KR:MASTER:LEFT:<socket> for each master that
# still answers after it was told to exit.
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
. lib/ssh_masters.sh
if [ -n "$2" ] && command -v ssh >/dev/null 2>&1; then
  cp=$(control_dir "$2")
  secs=$3 closed=0
  case $secs in ''|*[!0-9]*) secs=5 ;; esac
  for sock in "$cp"/*; do
    [ -S "$sock" ] || continue
    close_master "$sock" && closed=$((closed + 1))
  done
  echo "KR:MASTERS:$closed"
  case $2 in \~/*) rmdir -- "$cp" 2>/dev/null ;; esac
fi
rm -rf -- "$1"
