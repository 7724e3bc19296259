#!/bin/sh
# kubespray-mgmt-effect: changes
# Drain a node, then list the pods left on it, in one command
# (mgmt_driver/remote/kubectl.py KubectlClient.evacuate).
#   kubectl-drain NODE N KUBECTL... drain NODE OPTION...
# NODE the node (a DNS label, checked by the driver), N how many words
# KUBECTL has (sudo -n, kubectl's path, --kubeconfig PATH).  The drain
# runs as given; when it fails, the program ends with its status and
# nothing else runs.  Then KD:PODS on standard output and on standard
# error, and "KUBECTL get pods -A --field-selector spec.nodeName=NODE
# -o json" with its output and status as they are.
node=$1
n=$2
shift 2
"$@" || exit
echo KD:PODS
echo KD:PODS >&2
# Keep the first N words (kubectl's argv): for reads its list once.
i=0
total=$#
for word in "$@"; do
  [ "$i" -lt "$n" ] && set -- "$@" "$word"
  i=$((i + 1))
done
shift "$total"
exec "$@" get pods -A --field-selector "spec.nodeName=$node" -o json
