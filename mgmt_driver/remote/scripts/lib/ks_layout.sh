#!/bin/sh
# ks_layout ROOT [ANSIBLE_PLAYBOOK]: what a kubespray checkout is
# (mgmt_driver/remote/kubespray.py, detect_layout).  One KS:<KIND>[:<value>]
# line per finding: MISSING, FILE, SKIP_CONFIRMATION, LEGACY_GROUPS, GIT,
# GALAXY, minimal/maximal_ansible_version, ANSIBLE.  A subshell: its cd
# stays in it.
ks_layout() (
  cd -- "$1" 2>/dev/null || { echo KS:MISSING; exit 0; }
  for f in cluster.yml scale.yml remove-node.yml reset.yml facts.yml \
           playbooks/facts.yml; do
    if [ -f "$f" ]; then echo "KS:FILE:$f"; fi
  done
  if grep -qs skip_confirmation remove-node.yml playbooks/remove_node.yml
  then echo KS:SKIP_CONFIRMATION; fi
  if grep -qs '^\[kube-master\]' inventory/sample/inventory.ini
  then echo KS:LEGACY_GROUPS; fi
  if v=$(git describe --tags 2>/dev/null); then echo "KS:GIT:$v"; fi
  sed -n 's/^version:[[:space:]]*//p' galaxy.yml 2>/dev/null | \
    head -n 1 | sed 's/^/KS:GALAXY:/'
  for f in playbooks/ansible_version.yml ansible_version.yml; do
    if [ -f "$f" ]; then
      sed -n 's/^ *\(m[a-z]*imal_ansible_version\): */KS:\1:/p' "$f" |
        head -n 2
      break
    fi
  done
  if [ -n "${2:-}" ]; then
    "$2" --version 2>/dev/null | head -n 1 | sed 's/^/KS:ANSIBLE:/'
  fi
  exit 0
)
