#!/bin/sh
# kubespray-mgmt-effect: changes
# Start a detached ansible-playbook run (mgmt_driver/remote/detached.py).
#   run-start WS ROOT OP BOOK KEY LIMIT OWNER KEEP MAX ARGV...
# WS the workspace, ROOT the kubespray checkout, OP the operation, BOOK
# the playbook's name, KEY the hash of OP and ARGV (with the workspace's
# input files: the run's id), LIMIT its timeout in seconds, OWNER the
# name run.info records, KEEP the run logs to keep, MAX the playbook
# slots of the account (0: none).  Answers with KR:<KIND>[:<value>]
# lines: STARTED:<stem>:<pid>, or ATTACH/BUSY (with INFO), DONE, MISSING,
# NOHOME, SLOTUNSAFE; PREV, PREVRC and STALE describe the previous run.
. lib/ws_guard.sh
ws_guard create "$1" || exit 97
ws=$1 root=$2 op=$3 book=$4 key=$5 limit=$6 owner=$7 keep=$8 max=$9
shift 9
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
# shellcheck disable=SC2016 # expanded by that shell, not this one
setsid sh -c '
rc=$1 root=$2 limit=$3 slots=$4 max=$5; shift 5
took= waited=0
while [ "$max" -gt 0 ] && [ -z "$took" ]; do
  i=1
  while [ "$i" -le "$max" ]; do
    if command exec 8>>"$slots/slot-$i" && flock -n 8; then
      took=$i; break
    fi
    exec 8>&-
    i=$((i + 1))
  done
  [ -n "$took" ] && break
  [ "$waited" -ge "$limit" ] && { echo "KR:SLOTTIMEOUT:$max"; break; }
  [ $((waited % 60)) -eq 0 ] && echo "KR:SLOTWAIT:$max"
  sleep 1; waited=$((waited + 1))
done
if [ "$max" -gt 0 ] && [ -z "$took" ]; then code=124
else
  [ "$waited" -gt 0 ] && echo "KR:SLOT:$took:$waited"
  cd -- "$root" && timeout -k 30 "$limit" "$@" 8>&- 9>&-
  code=$?
fi
exec 8>&-
echo "$code" > "$rc.tmp" && mv -f -- "$rc.tmp" "$rc"
' sh "$ws/logs/$stem.rc" "$root" "$limit" "$slots" "$max" "$@" \
  < /dev/null >> "logs/$stem.log" 2>&1 &
echo "pid=$!" >> run.info.tmp && mv -f run.info.tmp run.info
echo "KR:STARTED:$stem:$!"
# shellcheck disable=SC2012 # the names are this program's own stems
ls -1 logs | sed -n 's/[.]log$//p' | LC_ALL=C sort -r |
  tail -n "+$((keep + 1))" | while IFS= read -r old; do
    rm -f -- "logs/$old.log" "logs/$old.rc" "logs/$old.seen"
  done
exit 0
