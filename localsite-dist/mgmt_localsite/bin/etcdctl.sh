#!/bin/sh
# The local site's kubespray etcdctl.sh: etcdctl (v3 API) against this
# VM's etcd member.  kubespray's wrapper reaches https://127.0.0.1:2379
# with client certificates; on the site every master shares one machine,
# so "this VM" is the address the SSH session reached (SSH_CONNECTION's
# third field), served over plain http (see ../etcd.py).  Outside an SSH
# session, ETCDCTL_ENDPOINTS says where to go.
ETCDCTL_API=3
export ETCDCTL_API
address=$(printf '%s\n' "${SSH_CONNECTION:-}" | cut -d' ' -f3)
case "$address" in
    '') exec etcdctl "$@" ;;
    *:*) exec etcdctl --endpoints="http://[$address]:2379" "$@" ;;
    *) exec etcdctl --endpoints="http://$address:2379" "$@" ;;
esac
