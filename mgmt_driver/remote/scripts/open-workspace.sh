#!/bin/sh
# kubespray-mgmt-effect: changes
# Begin a hook in one command (mgmt_driver/remote/kubespray.py,
# Workspace.open): what ensure-workspace and detect-layout do, then the
# workspace's record files.
#   open-workspace WS ROOT LIMIT ANSIBLE_PLAYBOOK FILE...
# Prints the KR: lines of ensure-workspace, the KS: lines of
# detect-layout, then per FILE (relative to WS) KO:MISSING:<file> or
# KO:FILE:<file>:<size>:<base64 of its first LIMIT + 1 bytes>; nothing
# for a file it cannot read plainly (the driver reads that one itself).
. lib/ws_guard.sh
ws_guard create "$1" || exit 97
. lib/ws_ready.sh
. lib/ks_layout.sh
ws=$1 root=$2 limit=$3 playbook=$4
shift 4
ws_ready "$ws" || exit
ks_layout "$root" "$playbook"
cd -- "$ws" || exit 1
command -v base64 >/dev/null 2>&1 || exit 0
for f in "$@"; do
  if [ ! -e "$f" ] && [ ! -L "$f" ]; then
    echo "KO:MISSING:$f"
  elif [ -f "$f" ] && [ -r "$f" ] && size=$(wc -c < "$f"); then
    # The size lets the driver tell a short read from the whole file.
    printf 'KO:FILE:%s:%s:' "$f" "$size"
    head -c "$((limit + 1))" -- "$f" | base64 | tr -d '\n'
    echo
  fi
done
exit 0
