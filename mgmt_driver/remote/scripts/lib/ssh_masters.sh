#!/bin/sh
# The SSH master connections (ControlPersist) Ansible keeps in a control
# path directory, told to exit (remove-workspace.sh, replace-workspace.sh).
# ssh(1) reads no config file (-F /dev/null: no Match exec, no
# ProxyCommand of the account's), and expands % tokens in ControlPath:
# each % of the path is doubled.  Each "ssh -O" is bounded by $secs.
#
# mux OP SOCKET: "ssh -O OP" on the master at SOCKET (% already doubled).
mux() {
  set -- -F /dev/null -o BatchMode=yes -o "ControlPath=$2" -O "$1" \
    kubespray-mgmt-master
  if command -v timeout >/dev/null 2>&1; then
    timeout -k 1 "${secs:-5}" ssh "$@"
  else
    ssh "$@"
  fi
}
# close_master SOCKET: tell its master to exit.  A socket whose master
# is gone already fails both -O exit and -O check at once: nothing to
# close; one that does not answer within the bound (timeout's 124 or
# more) is left: KR:MASTER:LEFT:<socket name>.  Status 0: it closed.
close_master() {
  escaped=$(printf '%s' "$1" | sed 's/%/%%/g')
  mux exit "$escaped" >/dev/null 2>&1 && return 0
  mux check "$escaped" >/dev/null 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    echo "KR:MASTER:LEFT:${1##*/}"
  fi
  return 1
}
# control_dir DIR: DIR with a leading "~/" made the home directory's.
control_dir() {
  case $1 in \~/*) printf '%s\n' "$HOME/${1#\~/}" ;; *) printf '%s\n' "$1" ;; esac
}
