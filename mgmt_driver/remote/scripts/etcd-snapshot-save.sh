#!/bin/sh
# kubespray-mgmt-effect: changes
# Takes an etcd snapshot on this control-plane node (kubespray-mgmt,
# mgmt_driver/operations/etcdsnapshots.py), as kubespray's own etcd backup handler
# does (roles/etcd/handlers/backup.yml: "etcdctl snapshot save"), through
# the etcdctl wrapper kubespray installs (etcdctl.sh: it passes the
# client certificate and key by path, never by value).
#   $1  the etcdctl command (etcdctl.sh)
#   $2  the user who reads the snapshot afterwards (the SSH login)
#   $3  the directory to make the private temporary directory in
# Prints "KS:SNAPSHOT:<path>" on success; on failure, the end of
# etcdctl's output on stderr, and nothing is left behind.
set -eu
umask 077
dir=$(mktemp -d "$3/kubespray-mgmt-etcd.XXXXXXXX")
if ! "$1" snapshot save "$dir/snapshot.db" >"$dir/log" 2>&1; then
    tail -n 20 "$dir/log" >&2
    rm -rf -- "$dir"
    exit 1
fi
rm -f -- "$dir/log"
if [ "$(id -u)" = 0 ] && [ "$2" != root ]; then
    chown -R -- "$2" "$dir"
fi
printf 'KS:SNAPSHOT:%s\n' "$dir/snapshot.db"
