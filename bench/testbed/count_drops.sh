#!/bin/sh
# Queue drops and TCP losses while plans run: brings SCENARIO up, times the plan files of
# PLAN_DIR at SIZES, prints every qdisc's drops and every host's TCP retransmissions, timeouts,
# fast retransmits, reordering seen and duplicates received (DSACKs sent), counted from
# the start of the run, removes the testbed. Run alone (root):
#   python3 -m syncplan testbed plans one-slow --sizes 64KiB,1MiB \
#       --algorithms direct,forest,ring --out-dir /tmp/plans
#   PYTHONPATH=. flock /tmp/syncplan-bench.lock sh bench/testbed/count_drops.sh one-slow \
#       /tmp/plans 64KiB,1MiB /tmp/drops.json
set -e
SCENARIO=$1 PLAN_DIR=$2 SIZES=$3 OUT=$4
S=$(mktemp -d /tmp/syncplan-drops.XXXXXX)
python3 -m syncplan testbed up "$SCENARIO" --state-dir "$S" > /dev/null
P=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prefix'])" "$S/$SCENARIO.json")
for ns in $(ip netns list | awk '{print $1}' | grep "^$P-"); do
  ip netns exec "$ns" nstat -n > /dev/null  # counters from here on
done
python3 -m syncplan testbed run "$SCENARIO" --state-dir "$S" --sizes "$SIZES" --reps 8 \
    --warmup 1 --plans "$PLAN_DIR"/*.json --out "$OUT" --plot "${OUT%.json}.png" > /dev/null || true
for ns in $(ip netns list | awk '{print $1}' | grep "^$P-"); do
  for dev in $(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$P"); do
    echo "$ns $dev bulk queue: $(tc -n "$ns" -s qdisc show dev "$dev" | grep -A1 'fifo' \
      | grep -o 'dropped [0-9]*')"
  done
  ip netns exec "$ns" nstat -z TcpRetransSegs TcpExtTCPTimeouts TcpExtTCPFastRetrans \
    TcpExtTCPLostRetransmit TcpExtTCPSACKReorder TcpExtTCPDSACKOldSent | grep -v '^#' \
    | awk -v ns="$ns" '$2 > 0 {print ns, $1, $2}'
done
python3 -m syncplan testbed down "$SCENARIO" --state-dir "$S" > /dev/null
rmdir "$S" 2>/dev/null || true
