#!/bin/sh
# kubespray-mgmt-effect: changes
# Unpack a whole document set into the workspace (mgmt_driver/remote/kubespray.py,
# Workspace.replace).
#   replace-workspace WS [CPDIR SECONDS SOCKET...] < TAR
# The tar stream on stdin is unpacked into a fresh directory; each
# top-level file is renamed into place, each top-level directory
# replaces its old copy as a whole.  Entries of the set never start with
# ".", so "$tmp"/* lists them all.
# With SOCKETs (the names of the control sockets of the hosts a removal
# took out, isolation.control_socket_name), then the SSH masters Ansible
# keeps at those names in CPDIR (isolation.control_path_dir) are told to
# exit, each within SECONDS (lib/ssh_masters.sh): KR:MASTERS:<closed>,
# KR:MASTER:LEFT:<socket>.
. lib/ws_guard.sh
ws_guard check "$1" || exit 97
set -e
umask 077
cd -- "$1"
tmp=$(mktemp -d .upload.XXXXXXXX)
trap 'rm -rf -- "$tmp"' EXIT
tar -x -p -f - -C "$tmp" --no-same-owner
for entry in "$tmp"/*; do
  name=${entry##*/}
  if [ -d "$entry" ]; then
    rm -rf -- ".old.$name"
    if [ -e "$name" ]; then mv -- "$name" ".old.$name"; fi
    mv -- "$entry" "$name"
    rm -rf -- ".old.$name"
  else
    mv -f -- "$entry" "$name"
  fi
done
if [ $# -le 3 ] || ! command -v ssh >/dev/null 2>&1; then exit 0; fi
set +e
. lib/ssh_masters.sh
cp=$(control_dir "$2")
secs=$3 closed=0
case $secs in ''|*[!0-9]*) secs=5 ;; esac
shift 3
for name in "$@"; do
  case $name in ''|*[!0-9a-f]*) continue ;; esac
  if [ -S "$cp/$name" ] && close_master "$cp/$name"; then
    closed=$((closed + 1))
  fi
done
echo "KR:MASTERS:$closed"
