#!/bin/sh
# Stands in for ssh as Open MPI's launch agent (--mca plm_rsh_agent), so that a hostfile naming two
# nodes runs both on this machine: mpirun then starts a daemon per node through this script, the
# ranks of each node see only their node (local rank and size), and they talk over TCP. It drops
# the agent's options and the host name, and runs the daemon's command here.
while [ $# -gt 0 ]; do
  case "$1" in
    -[BbcDEeFIiJLlmOoPpQRSWw]) shift 2 ;; # ssh's options that take a value (plm_rsh_args may add them)
    -*) shift ;;
    *)
      shift
      break
      ;;
  esac
done
exec /bin/sh -c "$*"
