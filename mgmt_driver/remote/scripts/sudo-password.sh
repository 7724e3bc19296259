#!/bin/sh
# kubespray-mgmt-effect: changes
# Run "$@" as root through sudo, on a host where sudo may ask a password
# (mgmt_driver/remote/escalation.py).  The first line of standard input is that
# password; the rest is the command's input.  It is read by whichever
# reads it first, sudo or "read", one byte at a time, so the command gets
# exactly the rest; the password is never an argument.
#   sh -c PROGRAM sudo COMMAND [ARG...]
# Its effect is the command's, which may change the host.  (A dry run
# never sees it: ssh.Connection wraps a command on its way out.)
if sudo -n -k true 2>/dev/null; then
    # NOPASSWD: the password line is not for the command.
    IFS= read -r _ || :
    exec sudo -n -- "$@"
fi
exec sudo -S -k -p '' -- "$@"
