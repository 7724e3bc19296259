#!/bin/sh
# kubespray-mgmt-effect: changes
# Make the workspace "$1" ready (mode 0700, kept with its files) and peek
# at its run lock (mgmt_driver/remote/detached.py, Workspace.ensure): prints
# KR:BUSY and the lock holder's run.info as KR:INFO: lines when another
# run holds it (lib/ws_ready.sh).
. lib/ws_guard.sh
ws_guard create "$1" || exit 97
. lib/ws_ready.sh
ws_ready "$1"
