#!/bin/sh
# kubespray-mgmt-effect: reads
# What a kubespray checkout is (mgmt_driver/remote/kubespray.py, detect_layout).
#   detect-layout ROOT [ANSIBLE_PLAYBOOK]
# One KS:<KIND>[:<value>] line per finding (lib/ks_layout.sh).
. lib/ks_layout.sh
ks_layout "$1" "${2:-}"
exit 0
