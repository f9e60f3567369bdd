#!/usr/bin/env bash
# Measures `ironic-agent inventory` of this machine from exec to exit: wall
# time (median, p90, worst of N runs), CPU time and peak RSS, read from each
# child's rusage by tools/benchexec (no external tool needed). When lscpu,
# lsblk and ip are installed it times them too, the tools IPA runs for the
# same facts (IPA adds lshw, udevadm, ipmitool and Python's start-up), and
# prints the ratio. Targets: under 25 ms and under 20 MiB.
#
#   scripts/bench-inventory.sh [RUNS]        # default 50
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/ironic-agent" ./cmd/ironic-agent
go build -o "$out/benchexec" ./tools/benchexec
echo "binary: $(stat -c %s "$out/ironic-agent") bytes (static, stripped); $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"

"$out/ironic-agent" inventory >/dev/null # warm the page cache
ours=$("$out/benchexec" -n "$runs" -- "$out/ironic-agent" inventory)
echo "ironic-agent inventory: $ours"

if command -v lscpu >/dev/null && command -v lsblk >/dev/null && command -v ip >/dev/null; then
	cat >"$out/tools.sh" <<'TOOLS'
lscpu -J >/dev/null
lsblk -bia --json -o KNAME,MODEL,SIZE,ROTA,TYPE,UUID,PARTUUID,SERIAL,WWN,LOG-SEC,PHY-SEC,TRAN >/dev/null
ip -j addr >/dev/null
TOOLS
	theirs=$("$out/benchexec" -n "$runs" -- bash "$out/tools.sh")
	echo "lscpu + lsblk + ip:     $theirs"
	med() { sed -n 's/.*wall_ms_median=\([0-9.]*\).*/\1/p' <<<"$1"; }
	echo "ratio (median wall): $(awk -v a="$(med "$theirs")" -v b="$(med "$ours")" 'BEGIN{printf "%.1f", a/b}')x"
fi
