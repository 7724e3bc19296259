#!/bin/sh
# kubespray-mgmt-effect: changes
# Unpack a whole document set into the workspace (mgmt_driver/remote/kubespray.py,
# Workspace.replace).
#   replace-workspace WS < TAR
# The tar stream on stdin is unpacked into a fresh directory; each
# top-level file is renamed into place, each top-level directory
# replaces its old copy as a whole.  Entries of the set never start with
# ".", so "$tmp"/* lists them all.
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
