#!/bin/sh
# kubespray-mgmt-effect: changes
# Install a configuration file from standard input and reload its
# program, in one command (mgmt_driver/remote/loadbalancer.py,
# apply_config): compare, write PATH.new, check it, back up PATH as
# PATH.bak, rename PATH.new into place, reload; a failed reload puts the
# previous file back.  Run under "sudo -n" when the file is root's (the
# whole program: a sudo that asks a password gets it as usual,
# mgmt_driver/remote/escalation.py).
#   lb-apply PATH MODE DIGEST NCHECK CHECK... RELOAD...
# MODE the file's octal mode, DIGEST the SHA-256 of the new text, NCHECK
# how many of the words are the check command (PATH.new is appended);
# the rest is the reload command.
# Prints KL:SAME when PATH already holds the text (nothing changed), else
# KL:STEP:<write|check|backup|swap|reload> before each step.  A refused
# check: KL:CHECKRC:<its status>, PATH.new removed (KL:CLEANUP:FAILED if
# it could not be), status 90; the check's own output passes through.
# KL:RESTORE:FAILED when the previous file could not be put back.
path=$1 mode=$2 digest=$3 ncheck=$4
shift 4
case $mode$ncheck in ''|*[!0-9]*) echo KL:BADARGS; exit 2 ;; esac
[ "$#" -gt "$ncheck" ] || { echo KL:BADARGS; exit 2; }
had=0
if [ -e "$path" ]; then
  cur=$(sha256sum -- "$path") || exit
  had=1
  if [ "${cur%% *}" = "$digest" ]; then
    cat >/dev/null
    echo KL:SAME
    exit 0
  fi
fi
new=$path.new
echo KL:STEP:write
(umask 077 && cat > "$new") && chmod "$mode" -- "$new" || exit
# The first NCHECK words with the new file appended.
check() (
  total=$# k=0
  for word do
    k=$((k + 1))
    [ "$k" -le "$ncheck" ] && set -- "$@" "$word"
  done
  shift "$total"
  "$@" "$new"
)
echo KL:STEP:check
check "$@"
rc=$?
if [ "$rc" != 0 ]; then
  echo "KL:CHECKRC:$rc"
  rm -f -- "$new" || echo KL:CLEANUP:FAILED
  exit 90
fi
shift "$ncheck"
if [ "$had" = 1 ]; then
  echo KL:STEP:backup
  cp -p -- "$path" "$path.bak" || exit
fi
echo KL:STEP:swap
mv -f -- "$new" "$path" || exit
echo KL:STEP:reload
"$@" && exit 0
rc=$?
if [ "$had" = 1 ]; then
  mv -f -- "$path.bak" "$path"
else
  rm -f -- "$path"
fi || echo KL:RESTORE:FAILED
exit "$rc"
