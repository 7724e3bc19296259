#!/bin/sh
# kubespray-mgmt-effect: reads
# The Kubernetes versions a kubespray checkout supports
# (mgmt_driver/remote/kubespray.py, supported_kube_versions).
#   supported-kube-versions ROOT FILE...
# Prints KS:KUBE:<version> for each amd64 key of kubelet_checksums in the
# first FILE that exists (kubespray's default kube_version is the first
# of them), at most 400 lines.
cd -- "$1" 2>/dev/null || exit 0
shift
for f in "$@"; do
  if [ -f "$f" ]; then
    awk '/^kubelet_checksums:/ {k = 1; next}
         k && /^[^ #]/ {exit}
         k && /^  [^ ]/ {a = ($1 == "amd64:"); next}
         k && a && /^    [^ #]/ {sub(":.*", "", $1); print "KS:KUBE:" $1}' \
      "$f" | head -n 400
    exit 0
  fi
done
