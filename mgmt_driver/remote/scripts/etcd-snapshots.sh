#!/bin/sh
# kubespray-mgmt-effect: reads
# Lists the etcd snapshots kubespray-mgmt keeps in an instance's
# workspace on the Ansible server (mgmt_driver/operations/etcdsnapshots.py).
#   $1  the directory
# Prints "<bytes> <name>" per snapshot file, oldest first (the names
# begin with their UTC time), then per partial copy a failed transfer
# left (".etcd-*.db.*.tmp"); a missing directory lists nothing.
set -eu
cd -- "$1" 2>/dev/null || exit 0
LC_ALL=C
export LC_ALL
for f in etcd-*.db .etcd-*.db.*.tmp; do
    [ -f "$f" ] || continue
    printf '%s %s\n' "$(wc -c <"$f" | tr -cd '0-9')" "$f"
done
