#!/bin/sh
# ws_guard MODE PATH; MODE "check" or "create" (mgmt_driver/remote/isolation.py).
# Every program that enters a workspace calls it first:
#   . lib/ws_guard.sh
#   ws_guard check "$1" || exit 97
# Walks PATH from "/"; every component that exists (lstat: a link is
# judged as a link) must be owned by root or by us; a directory must not
# be group- or other-writable unless sticky.  A link is followed only
# after the physical path it leads to (links resolved) passed the same
# check.  In "create" mode the missing components are then made one at
# a time (mkdir without -p, 0700, each in a directory just checked or
# just made) and checked too: one that another account slipped in
# meanwhile is refused by its owner; in "check" mode they are left
# alone.  One stat(1) for the existing components, one for the created
# ones: a few processes per command, whatever the depth.  On refusal: a
# WS:UNSAFE:<path>:<why> line on stdout, a sentence on stderr, status 97
# (isolation.UNSAFE_EXIT).
ws_guard() (
  set -f
  target=$2 me=$(id -u) || exit 97
  refuse() {
    echo "WS:UNSAFE:$1:$2"
    echo "kubespray-mgmt: refusing to use workspace $target: $1 $2" >&2
    exit 97
  }
  judge() {
    out=$(stat -c '%u %f %n' -- "$@" 2>/dev/null) ||
      refuse "$1" 'cannot be read'
    while IFS=' ' read -r uid m name; do
      m=$((0x$m))
      [ "$uid" = 0 ] || [ "$uid" = "$me" ] ||
        refuse "$name" "is owned by uid $uid"
      if [ $((m & 61440)) -eq 16384 ] && [ $((m & 18)) -ne 0 ] &&
         [ $((m & 512)) -eq 0 ]; then
        bits=$(printf %o $((m & 4095)))
        refuse "$name" "is writable by other accounts (mode $bits)"
      fi
    done <<EOF
$out
EOF
  }
  walk() (
    path=$1 how=$2 p='' rest=''
    IFS=/
    set -- /
    for c in ${path#/}; do
      [ -n "$c" ] || continue
      if [ -n "$rest" ] || { [ ! -e "$p/$c" ] && [ ! -L "$p/$c" ]; }; then
        rest=$rest/$c
        continue
      fi
      p=$p/$c
      set -- "$@" "$p"
      if [ -L "$p" ]; then
        judge "$@"
        set --
        real=$(cd -P -- "$p" 2>/dev/null && pwd -P) ||
          refuse "$p" 'cannot be entered'
        walk "$real" check || exit 97
      fi
    done
    [ $# -eq 0 ] || judge "$@"
    [ -n "$rest" ] && [ "$how" = create ] || exit 0
    set --
    for c in ${rest#/}; do
      p=$p/$c
      mkdir -m 0700 -- "$p" 2>/dev/null
      set -- "$@" "$p"
    done
    judge "$@"
  )
  walk "$target" "$1"
)
