#!/bin/sh
# Slurm TaskProlog: give every task of the job the service and its job id. Slurm adds each
# "export NAME=value" line this prints to the task's environment.
#   slurm.conf:  TaskProlog=/etc/syncplan/slurm/syncplan-task-prolog.sh
# Reads SYNCPLAN_SERVER and SYNCPLAN_JOB_TOKEN from /etc/syncplan/slurm.env (it runs as the
# job's user: that file must be readable by users; it holds only the job token).
conf=${SYNCPLAN_SLURM_CONF:-/etc/syncplan/slurm.env}
# shellcheck disable=SC1090
[ -r "$conf" ] && . "$conf"
[ -n "${SYNCPLAN_SERVER:-}" ] && [ -n "${SLURM_JOB_ID:-}" ] || exit 0
echo "export SYNCPLAN_JOB_ID=slurm-$SLURM_JOB_ID"
echo "export SYNCPLAN_SERVER=$SYNCPLAN_SERVER"
[ -n "${SYNCPLAN_JOB_TOKEN:-}" ] && echo "export SYNCPLAN_JOB_TOKEN=$SYNCPLAN_JOB_TOKEN"
exit 0
