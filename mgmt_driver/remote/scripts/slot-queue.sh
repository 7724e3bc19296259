#!/bin/sh
# kubespray-mgmt-effect: reads
# The playbook slots of this account and the runs queued for them
# (mgmt_driver/remote/detached.py, shown by mgmt_driver/adapters/status.py).
#   slot-queue MAX
# Prints KR:TAKEN:<slots of the first MAX held>, then one line per live
# ticket, first served first (at most 200):
#   KR:WAIT:<ticket>:<operation>:<playbook>:<arrived>:<workspace>
# or KR:NOSLOTS when there is no slot directory.  Who holds a lock is
# read from /proc/locks (by inode): nothing is locked, not even briefly.
case $HOME in /?*) ;; *) echo KR:NOSLOTS; exit 0 ;; esac
slots=$HOME/.kubespray-mgmt/playbook-slots
cd -- "$slots" 2>/dev/null || { echo KR:NOSLOTS; exit 0; }
LC_ALL=C; export LC_ALL
held=$(awk '$2 == "FLOCK" { n = split($6, p, ":"); print p[n] }' \
  /proc/locks 2>/dev/null | sort -u)
is_held() {
  inode=$(stat -c %i -- "$1" 2>/dev/null) || return 1
  printf '%s\n' "$held" | grep -qx -- "$inode"
}
taken=0 i=1
while [ "$i" -le "$1" ]; do
  is_held "slot-$i" && taken=$((taken + 1))
  i=$((i + 1))
done
echo "KR:TAKEN:$taken"
field() { sed -n "s/^$1=//p" "$2" 2>/dev/null | head -n 1 | head -c 300; }
# shellcheck disable=SC2010 # ticket names are digits and dots only
ls -1 queue 2>/dev/null | grep -x '[0-9]\{12\}[.][0-9.]*' | sort |
  head -n 200 | while IFS= read -r t; do
    is_held "queue/$t" || continue
    printf 'KR:WAIT:%s:%s:%s:%s:%s\n' "$t" \
      "$(field operation "queue/$t")" "$(field playbook "queue/$t")" \
      "$(field arrived "queue/$t")" "$(field workspace "queue/$t")"
  done
