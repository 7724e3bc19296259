#!/bin/sh
# kubespray-mgmt-effect: changes
# Start a detached ansible-playbook run (mgmt_driver/remote/detached.py).
#   run-start WS ROOT OP BOOK KEY LIMIT OWNER KEEP MAX WAIT RANK ARGV...
# WS the workspace, ROOT the kubespray checkout, OP the operation, BOOK
# the playbook's name, KEY the hash of OP and ARGV (with the workspace's
# input files: the run's id), LIMIT its timeout in seconds, OWNER the
# name run.info records, KEEP the run logs to keep, MAX the playbook
# slots of the account (0: none), WAIT the seconds the run may wait for
# one, RANK the seconds its priority class adds to its place in the
# queue (0 for the first class).  Answers with KR:<KIND>[:<value>]
# lines: STARTED:<stem>:<pid>, or ATTACH/BUSY (with INFO), DONE, MISSING,
# NOHOME, SLOTUNSAFE, BADARGS; PREV, PREVRC and STALE describe the
# previous run.
. lib/ws_guard.sh
ws_guard create "$1" || exit 97
ws=$1 root=$2 op=$3 book=$4 key=$5 limit=$6 owner=$7 keep=$8 max=$9
wait=${10} rank=${11}
shift 11
case $wait$rank in ''|*[!0-9]*) echo KR:BADARGS; exit 0 ;; esac
umask 077
mkdir -p -- "$ws" && cd -- "$ws" || exit 90
for tool in flock setsid timeout tail sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || { echo "KR:MISSING:$tool"; exit 0; }
done
mkdir -p logs && chmod 0700 logs || exit 91
inputs=$(find . \( -path ./logs -o -path ./.ansible \) -prune -o \
  -type f ! -name 'run.*' -print |
  LC_ALL=C sort | xargs -r -d '\n' sha256sum -- | sha256sum | cut -c1-64)
id="$key.$inputs"
info_id() { sed -n 's/^id=//p' run.info 2>/dev/null | head -n 1; }
exec 9>>run.lock
if ! flock -w 1 9; then
  if [ "$(info_id)" = "$id" ]; then echo KR:ATTACH; else echo KR:BUSY; fi
  head -c 4096 run.info 2>/dev/null | sed 's/^/KR:INFO:/'
  exit 0
fi
if [ -f run.info ]; then
  head -c 4096 run.info | sed 's/^/KR:PREV:/'
  prev=$(sed -n 's/^stem=//p' run.info | head -n 1)
  case $prev in ''|*[!A-Za-z0-9_.-]*) prev= ;; esac
  if [ -n "$prev" ] && [ -f "logs/$prev.rc" ]; then
    rc=$(head -c 8 "logs/$prev.rc")
    echo "KR:PREVRC:$rc"
    if [ "$rc" = 0 ] && [ ! -e "logs/$prev.seen" ] &&
       [ "$(info_id)" = "$id" ]; then
      : > "logs/$prev.seen"
      echo KR:DONE
      exit 0
    fi
  elif [ -n "$prev" ] && [ ! -e "logs/$prev.seen" ]; then
    echo KR:STALE
  fi
fi
slots=
if [ "$max" -gt 0 ]; then
  case $HOME in /?*) ;; *) echo KR:NOHOME; exit 0 ;; esac
  slots=$HOME/.kubespray-mgmt/playbook-slots
  found=$(ws_guard create "$slots" 2>/dev/null) || {
    printf '%s\n' "$found" | sed -n 's/^WS:UNSAFE:/KR:SLOTUNSAFE:/p'
    exit 0
  }
fi
stem=$(date -u +%Y%m%dT%H%M%SZ)-$op-$book
while [ -e "logs/$stem.log" ]; do
  sleep 1; stem=$(date -u +%Y%m%dT%H%M%SZ)-$op-$book
done
: > "logs/$stem.log"
printf 'id=%s\nstem=%s\noperation=%s\nplaybook=%s\nowner=%s\n' \
  "$id" "$stem" "$op" "$book" "$owner" > run.info.tmp
printf 'started=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> run.info.tmp
# The run itself, in a session of its own: SCRIPT of "sh -c SCRIPT sh
# RC ..." (lib/is_run.sh knows it by RC, its fifth argv word).  It takes
# a playbook slot, runs the playbook under timeout(1) and writes its exit
# status after giving the slot back.
# The queue for the slots: a waiter puts a ticket in $slots/queue, named
# by its place (arrival time in seconds plus RANK, then nanoseconds and
# its pid) and
# flock(1)ed for as long as it waits; only the first live ticket may take
# a free slot.  A ticket nobody holds belongs to a waiter that is gone:
# the next waiter behind it deletes it, so it blocks nobody.
# shellcheck disable=SC2016 # expanded by that shell, not this one
setsid sh -c '
rc=$1 root=$2 limit=$3 slots=$4 max=$5 wait=$6 rank=$7 op=$8 book=$9
shift 9
took= waited=0 queue=$slots/queue ticket= mine=
if [ "$max" -gt 0 ]; then
  mkdir -p -- "$queue" || exit 90
  now=$(date +%s.%N) sec=${now%.*} ns=${now#*.}
  case $ns in ????????? ) ;; *) ns=000000000 ;; esac
  mine=$(printf "%012d.%s.%s" $((sec + rank)) "$ns" $$)
  printf "arrived=%s\noperation=%s\nplaybook=%s\nworkspace=%s\n" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$op" "$book" "${rc%/logs/*}" \
    > "$queue/.new.$$"
  command exec 7<"$queue/.new.$$" && flock -n 7 &&
    mv -f -- "$queue/.new.$$" "$queue/$mine" && ticket=$queue/$mine
fi
first() {
  [ -z "$ticket" ] && return 0
  for t in $(ls -- "$queue" | LC_ALL=C sort); do
    case $t in *[!0-9.]*) continue ;; esac
    [ "$t" = "$mine" ] && return 0
    if command exec 6<"$queue/$t"; then
      if flock -n 6; then rm -f -- "$queue/$t"; exec 6<&-; continue; fi
      exec 6<&-; return 1
    fi
  done 2>/dev/null
  return 0
}
while [ "$max" -gt 0 ] && [ -z "$took" ]; do
  if first; then
    i=1
    while [ "$i" -le "$max" ]; do
      if command exec 8>>"$slots/slot-$i" && flock -n 8; then
        took=$i; break
      fi
      exec 8>&-
      i=$((i + 1))
    done
  fi
  [ -n "$took" ] && break
  [ "$waited" -ge "$wait" ] && { echo "KR:SLOTTIMEOUT:$max:$waited"; break; }
  [ $((waited % 60)) -eq 0 ] && echo "KR:SLOTWAIT:$max"
  sleep 1; waited=$((waited + 1))
done
[ -n "$ticket" ] && rm -f -- "$ticket"
exec 7<&-
if [ "$max" -gt 0 ] && [ -z "$took" ]; then code=124
else
  [ "$waited" -gt 0 ] && echo "KR:SLOT:$took:$waited"
  cd -- "$root" && timeout -k 30 "$limit" "$@" 6<&- 8>&- 9>&-
  code=$?
fi
exec 8>&-
echo "$code" > "$rc.tmp" && mv -f -- "$rc.tmp" "$rc"
' sh "$ws/logs/$stem.rc" "$root" "$limit" "$slots" "$max" "$wait" "$rank" \
  "$op" "$book" "$@" < /dev/null >> "logs/$stem.log" 2>&1 &
echo "pid=$!" >> run.info.tmp && mv -f run.info.tmp run.info
echo "KR:STARTED:$stem:$!"
# shellcheck disable=SC2012 # the names are this program's own stems
ls -1 logs | sed -n 's/[.]log$//p' | LC_ALL=C sort -r |
  tail -n "+$((keep + 1))" | while IFS= read -r old; do
    rm -f -- "logs/$old.log" "logs/$old.rc" "logs/$old.seen"
  done
exit 0
