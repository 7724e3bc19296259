#!/bin/sh
# ws_ready WS: after "ws_guard create WS", make the workspace ready (mode
# 0700, kept with its files) and peek at its run lock
# (mgmt_driver/remote/detached.py): prints KR:BUSY and the lock holder's
# run.info as KR:INFO: lines when another run holds it.  Status 1 when
# the directory cannot be made.  A subshell: its cd and umask stay in it.
ws_ready() (
  umask 077
  # chmod as well: a directory that already existed may be wider.
  mkdir -p -- "$1" && chmod 0700 -- "$1" && cd -- "$1" || exit 1
  [ -f run.info ] || exit 0
  command -v flock >/dev/null 2>&1 || exit 0
  ( flock -n 9 ) 9>>run.lock && exit 0
  echo KR:BUSY
  head -c 4096 run.info | sed 's/^/KR:INFO:/'
  exit 0
)
