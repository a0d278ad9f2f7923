#!/bin/sh
# Stands in for ssh as Open MPI's launch agent (--mca plm_rsh_agent), so that a hostfile naming two
# nodes runs both on this machine: mpirun then starts a daemon per node through this script, the
# ranks of each node see only their node (local rank and size), and they talk over TCP. It drops
# the agent's options, and runs the daemon's command here with a session directory of the node's own
# (two daemons and mpirun on one machine would otherwise create the same job directory under /tmp at
# once, which Open MPI can fail with "File exists").
while [ $# -gt 0 ]; do
  case "$1" in
    -[BbcDEeFIiJLlmOoPpQRSWw]) shift 2 ;; # ssh's options that take a value (plm_rsh_args may add them)
    -*) shift ;;
    *)
      host="$1"
      shift
      break
      ;;
  esac
done
session="${TMPDIR:-/tmp}/tapegrad-mpi-$(id -u)-$host"
mkdir -p "$session"
OMPI_MCA_orte_tmpdir_base="$session"
export OMPI_MCA_orte_tmpdir_base
exec /bin/sh -c "$*"
