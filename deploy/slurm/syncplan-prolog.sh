#!/bin/sh
# Slurm PrologSlurmctld: register the job's allocated nodes with the syncplan service, so its
# ranks can fetch a plan at start-up (job id "slurm-$SLURM_JOB_ID").
#   slurm.conf:  PrologSlurmctld=/etc/syncplan/slurm/syncplan-prolog.sh
# Settings come from /etc/syncplan/slurm.env (SYNCPLAN_SLURM_CONF overrides the path):
#   SYNCPLAN_SERVER=http://planner:8080   SYNCPLAN_JOB_TOKEN=...
#   SYNCPLAN_GPUS_PER_NODE (default: from SLURM_GPUS_PER_NODE or SLURM_JOB_GPUS, else 1)
#   SYNCPLAN_SIZE_BYTES (default 26214400: a 25 MiB gradient bucket; the job may re-register)
#   SYNCPLAN_STRICT=1 to fail the job when the service refuses (default: log and go on)
set -u
conf=${SYNCPLAN_SLURM_CONF:-/etc/syncplan/slurm.env}
# shellcheck disable=SC1090
[ -r "$conf" ] && . "$conf"
strict=${SYNCPLAN_STRICT:-0}

fail() {
    echo "syncplan-prolog: job ${SLURM_JOB_ID:-?}: $*" >&2
    [ "$strict" = 1 ] && exit 1
    exit 0
}

[ -n "${SYNCPLAN_SERVER:-}" ] || fail "SYNCPLAN_SERVER is not set (in $conf)"
[ -n "${SYNCPLAN_JOB_TOKEN:-}" ] || fail "SYNCPLAN_JOB_TOKEN is not set (in $conf)"
[ -n "${SLURM_JOB_ID:-}" ] || fail "SLURM_JOB_ID is not set: run me as a Slurm prolog"
[ -n "${SLURM_JOB_NODELIST:-}" ] || fail "SLURM_JOB_NODELIST is not set"

gpus=${SYNCPLAN_GPUS_PER_NODE:-}
if [ -z "$gpus" ] && [ -n "${SLURM_GPUS_PER_NODE:-}" ]; then
    gpus=${SLURM_GPUS_PER_NODE##*:}            # "a100:8" -> 8
fi
if [ -z "$gpus" ] && [ -n "${SLURM_JOB_GPUS:-}" ]; then
    gpus=$(echo "$SLURM_JOB_GPUS" | tr ',' '\n' | grep -c .)
fi
gpus=${gpus:-1}
case $gpus in ''|*[!0-9]*|0) fail "cannot tell the GPUs per node (got '$gpus')" ;; esac

nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST") || fail "scontrol failed"
ranks=""
for node in $nodes; do
    g=0
    while [ "$g" -lt "$gpus" ]; do
        ranks="$ranks{\"host\":\"$node\",\"local_rank\":$g},"
        g=$((g + 1))
    done
done
body="{\"ranks\":[${ranks%,}],\"size_bytes\":${SYNCPLAN_SIZE_BYTES:-26214400}}"
out=$(mktemp) || fail "mktemp failed"
trap 'rm -f "$out"' EXIT
code=$(curl -sS --max-time "${SYNCPLAN_TIMEOUT_S:-10}" -o "$out" -w '%{http_code}' -X PUT \
    -H "Authorization: Bearer $SYNCPLAN_JOB_TOKEN" -H 'Content-Type: application/json' \
    --data "$body" "${SYNCPLAN_SERVER%/}/v1/jobs/slurm-$SLURM_JOB_ID" 2>&1) \
    || fail "cannot reach $SYNCPLAN_SERVER: $code"
[ "$code" = 200 ] || fail "the service refused the job (HTTP $code): $(cat "$out")"
echo "syncplan-prolog: job $SLURM_JOB_ID registered as slurm-$SLURM_JOB_ID ($gpus per node)" >&2
exit 0
