#!/bin/sh
# kubespray-mgmt-effect: reads
# kubespray-mgmt doctor: which of the commands named as arguments this
# account finds on its PATH (or as the absolute paths given).  One line
# per command: "KD:HAVE:NAME" or "KD:MISSING:NAME"; then "KD:DONE", so
# that a run cut short (sudo refused, a broken shell) tells itself
# apart from a host that lacks every command.
for tool in "$@"; do
  if command -v "$tool" >/dev/null 2>&1; then
    printf 'KD:HAVE:%s\n' "$tool"
  else
    printf 'KD:MISSING:%s\n' "$tool"
  fi
done
echo KD:DONE
