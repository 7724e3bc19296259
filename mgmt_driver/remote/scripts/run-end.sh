#!/bin/sh
# kubespray-mgmt-effect: changes
# The exit status and the end of a detached run (mgmt_driver/remote/detached.py).
#   run-end WS STEM PID BYTES
# Prints KR:RC:<status> (and marks it collected), KR:RUNNING or KR:GONE,
# then KR:TAIL and the last BYTES of the log.
. lib/ws_guard.sh
ws_guard check "$1" || exit 97
cd -- "$1" || exit 90
if [ -f "logs/$2.rc" ]; then
  echo "KR:RC:$(head -c 8 "logs/$2.rc")"
  : > "logs/$2.seen"
elif kill -0 "$3" 2>/dev/null; then
  echo KR:RUNNING
else
  echo KR:GONE
fi
echo KR:TAIL
tail -c "$4" -- "logs/$2.log" 2>/dev/null
exit 0
