#!/bin/sh
# kubespray-mgmt-effect: changes
# Install a configuration file from standard input and reload its
# program, in one command (mgmt_driver/remote/loadbalancer.py,
# apply_config): write PATH.new, compare it with PATH, check it, back up
# PATH as PATH.bak, rename PATH.new into place, reload; a failed reload
# puts the previous file back.  Run under "sudo -n" when the file is
# root's (the whole program: a sudo that asks a password gets it as
# usual, mgmt_driver/remote/escalation.py).
#   lb-apply PATH MODE NCHECK CHECK... RELOAD...
# MODE the file's octal mode, NCHECK how many of the words are the check
# command (PATH.new is appended); the rest is the reload command.  The
# text is compared as a file, not by a digest in the words: the file may
# hold a secret (keepalived's auth_pass), and every process's words are
# readable by any user of the host.
# Prints KL:SAME when PATH already holds the text (PATH.new removed,
# PATH untouched), else KL:STEP:<check|backup|swap|reload> before each
# step.  A refused check: KL:CHECKRC:<its status>, PATH.new removed
# (KL:CLEANUP:FAILED if it could not be), status 90; the check's own
# output passes through.  KL:RESTORE:FAILED when the previous file could
# not be put back.
path=$1 mode=$2 ncheck=$3
shift 3
case $mode$ncheck in ''|*[!0-9]*) echo KL:BADARGS; exit 2 ;; esac
[ "$#" -gt "$ncheck" ] || { echo KL:BADARGS; exit 2; }
new=$path.new
# A stale PATH.new (a crash) goes first; noclobber then creates the file
# afresh (O_EXCL: a symlink planted there is not followed), and umask
# keeps it the owner's alone until it is complete and MODE applies.
rm -f -- "$new" || exit
(umask 077 && set -C && cat > "$new") || exit
had=0
if [ -e "$path" ]; then
  had=1
  # cmp's "differ" line names no byte of the text; it goes nowhere.
  cmp -- "$new" "$path" >/dev/null
  case $? in
    0) rm -f -- "$new" || exit
       echo KL:SAME
       exit 0 ;;
    1) ;;
    *) rm -f -- "$new"; exit 2 ;;
  esac
fi
chmod "$mode" -- "$new" || exit
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
