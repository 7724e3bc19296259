#!/bin/sh
# kubespray-mgmt-effect: reads
# Whether kubectl runs on this host, and the cluster's nodes, in one
# command (mgmt_driver/remote/kubectl.py nodes_on_first_reachable).
#   kubectl-nodes KUBECTL...
# KUBECTL the argv of kubectl (sudo -n, its path, --kubeconfig PATH).
# First "KUBECTL version --client", what first_reachable asks of a host:
# when it fails, its stderr, then KN:NOCLIENT on stderr and exit 97 (the
# caller tries the next host).  Then KN:CLIENT on stderr (a timeout after
# it is the node list's) and "KUBECTL get nodes -o json", its output and
# status as they are.
"$@" version --client >/dev/null || { echo KN:NOCLIENT >&2; exit 97; }
echo KN:CLIENT >&2
exec "$@" get nodes -o json
