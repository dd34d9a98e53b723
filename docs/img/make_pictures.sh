#!/bin/sh
# Make the README's pictures: the demo cluster, a forest plan on it, and the /ui page of
# `syncplan serve --demo` with a registered job (needs chromium). Run from the repo root.
# `sh docs/img/make_pictures.sh examples` makes only docs/img/examples/<example>.png, the
# pictures of docs/examples.md (needs the plot extra: matplotlib). PYTHON picks the
# interpreter (default python3).
set -eu
out=docs/img
py=${PYTHON:-python3}
if [ "${1:-}" = examples ]; then
    mkdir -p "$out/examples"
    for f in examples/*.json; do
        name=$(basename "$f" .json)
        "$py" -m syncplan draw topology "$f" -o "$out/examples/$name.png"
    done
    "$py" - "$out/examples" <<'PY'
import sys
from pathlib import Path
from PIL import Image
for p in sorted(Path(sys.argv[1]).glob("*.png")):  # a palette of 256 colours: small files
    Image.open(p).convert("RGB").quantize(colors=256).save(p, optimize=True)
PY
    ls -l "$out/examples"
    exit 0
fi
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
"$py" -m syncplan draw topology examples/demo.json -o "$out/topology.png"
"$py" -m syncplan plan -t examples/demo.json -a forest -o "$tmp/plan.json" >/dev/null
"$py" -m syncplan draw plan "$tmp/plan.json" -t examples/demo.json -o "$out/plan.png"
port=18123
(cd "$tmp" && exec "$py" -m syncplan serve --demo --demo-topology "$OLDPWD/examples/demo.json" \
    --port $port --log-level warning >"$tmp/serve.log" 2>&1) &
pid=$!
base=http://127.0.0.1:$port
for _ in $(seq 100); do curl -sf $base/readyz >/dev/null && break; sleep 0.3; done
# two of the demo's hosts run agents (their reports replace the declared nodes; the
# declared links to their NICs take the measured rates)
for h in h0 h1; do
    "$py" - "$h" <<'PY' | curl -sf -X PUT -H 'Authorization: Bearer dev-agent-token' \
        -H 'Content-Type: application/json' -d @- "$base/v1/agents/$h/report" >/dev/null
import json, sys
h = sys.argv[1]
nodes = [{"id": f"gpu{g}", "kind": "gpu"} for g in range(4)] + [
    {"id": "pcie_switch0", "kind": "pcie_switch"}, {"id": "nic0", "kind": "nic"}]
links = [{"src": f"gpu{g}", "dst": "pcie_switch0", "bandwidth_GBps": 25.0} for g in range(4)]
links.append({"src": "nic0", "dst": "pcie_switch0", "bandwidth_GBps": 25.0})
peer = "h1" if h == "h0" else "h0"
print(json.dumps({"host": h, "seq": 1, "nodes": nodes, "links": links,
                  "nics": [{"name": "eth0", "kind": "ethernet", "speed_GBps": 12.5}],
                  "peers": [{"peer_host": peer, "bandwidth_GBps": 11.7, "latency_us": 9.0}]}))
PY
done
ranks=$("$py" -c 'import json; print(json.dumps([f"h{h}/gpu{g}" for h in range(4) for g in range(4)]))')
curl -sf -X PUT -H 'Authorization: Bearer dev-job-token' -H 'Content-Type: application/json' \
    -d "{\"ranks\": $ranks, \"size_bytes\": 268435456}" $base/v1/jobs/train-7 >/dev/null
curl -sf -X PUT -H 'Authorization: Bearer dev-job-token' -H 'Content-Type: application/json' \
    -d "{\"ranks\": $(echo "$ranks" | "$py" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[:8]))'), \"size_bytes\": 67108864, \"algorithm\": \"ring\"}" \
    $base/v1/jobs/eval-2 >/dev/null
for job in train-7 eval-2; do
    curl -sf -H 'Authorization: Bearer dev-job-token' $base/v1/jobs/$job/plan >/dev/null
done
"$py" - "$base/ui" "$out/ui.png" <<'PY'
import sys
from pathlib import Path
from syncplan.draw.browser import screenshot, shrink_png
raw = Path(sys.argv[2]).with_suffix(".raw.png")
screenshot(sys.argv[1], raw, width=1300, height=1500)
shrink_png(raw, Path(sys.argv[2]), width=900, colors=128)
raw.unlink()
PY
for f in topology plan; do
    "$py" -c "from pathlib import Path; from syncplan.draw.browser import shrink_png as s; p=Path('$out/$f.png'); s(p, p, width=900, colors=128)"
done
ls -l "$out"
