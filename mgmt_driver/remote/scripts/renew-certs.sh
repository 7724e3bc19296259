#!/bin/sh
# kubespray-mgmt-effect: changes
# Renew one control-plane node's kubeadm certificates and restart its
# control-plane static pods so that they load them: the steps of
# kubespray's k8s-certs-renew.sh (v2.31.0,
# roles/kubernetes/control-plane/templates/k8s-certs-renew.sh.j2),
# without its timer check and without its wait for port 6443 that has no
# deadline (the driver waits for the API server, with one).
# $1: kubeadm, $2: crictl.
set -eu
kubeadm=$1
crictl=$2
"$kubeadm" certs renew all
pods=$("$crictl" pods --namespace kube-system --name \
    '^(kube-apiserver|kube-controller-manager|kube-scheduler|etcd)-' -q)
if [ -n "$pods" ]; then
    # One pod id per word.
    # shellcheck disable=SC2086
    "$crictl" rmp -f $pods
fi
# kubespray refreshes root's kubectl configuration too.
if [ -f /etc/kubernetes/admin.conf ] && [ -w /root/.kube/config ]; then
    cp /etc/kubernetes/admin.conf /root/.kube/config
fi
echo "renewed and restarted: $(echo "$pods" | wc -w) static pod(s)"
