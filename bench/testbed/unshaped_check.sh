#!/bin/sh
# The same plans on shaped links, on bare veths (every qdisc deleted), and shaped again: does
# a program's per-step cost come from the shaping or from the transport and the CPU? Plans
# from `syncplan testbed plans SCENARIO --sizes 4KiB,64KiB --algorithms
# ring,recursive-doubling,star,direct,halving-doubling --out-dir PLAN_DIR`. Run alone (root):
#   PYTHONPATH=. flock /tmp/syncplan-bench.lock sh bench/testbed/unshaped_check.sh \
#       homogeneous /tmp/plans bench/results/testbed-pairwise
set -e
SCENARIO=$1 PLAN_DIR=$2 OUT=$3
S=$(mktemp -d /tmp/syncplan-unshaped.XXXXXX)
for mode in shaped unshaped shaped2; do
  python3 -m syncplan testbed up "$SCENARIO" --state-dir "$S" > /dev/null
  P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prefix'])" "$S/$SCENARIO.json")
  if [ "$mode" = unshaped ]; then
    for ns in $(ip netns list | awk '{print $1}' | grep "^$P-"); do
      for dev in $(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$P"); do
        tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
      done
    done
  fi
  python3 -m syncplan testbed run "$SCENARIO" --state-dir "$S" --sizes 4KiB,64KiB --reps 15 \
      --warmup 2 --plans "$PLAN_DIR"/*.json --out "$OUT-$mode.json" --plot "$OUT-$mode.png" \
      > /dev/null 2>&1 || true
  python3 -m syncplan testbed down "$SCENARIO" --state-dir "$S" > /dev/null
done
rmdir "$S" 2>/dev/null || true
