#!/bin/sh
# Slurm EpilogSlurmctld: forget the job at the syncplan service (a missing job is fine).
#   slurm.conf:  EpilogSlurmctld=/etc/syncplan/slurm/syncplan-epilog.sh
set -u
conf=${SYNCPLAN_SLURM_CONF:-/etc/syncplan/slurm.env}
# shellcheck disable=SC1090
[ -r "$conf" ] && . "$conf"
if [ -z "${SYNCPLAN_SERVER:-}" ] || [ -z "${SYNCPLAN_JOB_TOKEN:-}" ] || [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "syncplan-epilog: SYNCPLAN_SERVER, SYNCPLAN_JOB_TOKEN and SLURM_JOB_ID are needed" >&2
    exit 0
fi
code=$(curl -sS --max-time "${SYNCPLAN_TIMEOUT_S:-10}" -o /dev/null -w '%{http_code}' \
    -X DELETE -H "Authorization: Bearer $SYNCPLAN_JOB_TOKEN" \
    "${SYNCPLAN_SERVER%/}/v1/jobs/slurm-$SLURM_JOB_ID" 2>&1) || code="unreachable: $code"
case $code in
    204|404) ;;
    *) echo "syncplan-epilog: job $SLURM_JOB_ID: delete gave $code" >&2 ;;
esac
exit 0
