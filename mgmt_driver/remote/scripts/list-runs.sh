#!/bin/sh
# kubespray-mgmt-effect: reads
# The newest run logs of a workspace (mgmt_driver/adapters/status.py).
#   list-runs LOGS_DIR N
# Prints "<rc or - or ?>/<name>" for the newest N run logs in LOGS_DIR;
# a missing directory prints nothing (no run yet).
cd -- "$1" 2>/dev/null || exit 0
LC_ALL=C; export LC_ALL
# One name a line; a line that is not a run log's name is left out, and
# status.parse_runs checks what is printed.
# shellcheck disable=SC2010
ls -1A | grep -E '^[0-9]{8}T[0-9]{6}Z-.+[.]log$' | sort | tail -n "$2" |
while IFS= read -r f; do
  s=${f%.log}; rc=-
  if [ -f "$s.rc" ]; then rc=$(head -c 8 -- "$s.rc" | tr -cd '0-9-'); fi
  printf '%s/%s\n' "${rc:-?}" "$f"
done
