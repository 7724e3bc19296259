#!/bin/sh
# is_run PID RC: process PID is the leader of the run whose exit status
# file is RC, not whatever process has that pid now (a pid read from
# run.info may be stale: the run gone, its pid reused).  The leader's
# argv, as run-start.sh's setsid gives it, is "sh -c SCRIPT sh RC ...":
# NULs become newlines and SCRIPT's newlines \001, so its fifth line is
# RC.  Without /proc nothing is verified, so nothing is killed.
is_run() {
  [ -r "/proc/$1/cmdline" ] || return 1
  [ "$(tr '\n\000' '\001\n' < "/proc/$1/cmdline" |
       sed -n 5p)" = "$2" ]
}
