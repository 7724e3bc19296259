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
# ssh(1) reads no config file (-F /dev/null: no Match exec, no
# ProxyCommand of the account's), and expands % tokens in ControlPath:
# each % of the path is doubled.  A socket whose master is gone already
# fails both -O exit and -O check at once: nothing to close; one that
# does not answer within the bound (timeout's 124 or more) is left.
mux() {
  set -- -F /dev/null -o BatchMode=yes -o "ControlPath=$2" -O "$1" \
    kubespray-mgmt-master
  if command -v timeout >/dev/null 2>&1; then
    timeout -k 1 "$secs" ssh "$@"
  else
    ssh "$@"
  fi
}
if [ -n "$2" ] && command -v ssh >/dev/null 2>&1; then
  case $2 in \~/*) cp="$HOME/${2#\~/}" ;; *) cp=$2 ;; esac
  secs=$3 closed=0
  case $secs in ''|*[!0-9]*) secs=5 ;; esac
  for sock in "$cp"/*; do
    [ -S "$sock" ] || continue
    escaped=$(printf '%s' "$sock" | sed 's/%/%%/g')
    if mux exit "$escaped" >/dev/null 2>&1; then
      closed=$((closed + 1))
    else
      mux check "$escaped" >/dev/null 2>&1
      rc=$?
      if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
        echo "KR:MASTER:LEFT:${sock##*/}"
      fi
    fi
  done
  echo "KR:MASTERS:$closed"
  case $2 in \~/*) rmdir -- "$cp" 2>/dev/null ;; esac
fi
rm -rf -- "$1"
