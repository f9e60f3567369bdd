#!/usr/bin/env bash
# Measures `ironic-agent inventory` of this machine from exec to exit: wall
# time (median and worst of N runs) and peak RSS (GNU time's maximum resident
# set size), next to the tools IPA runs for the same facts (lscpu, lsblk, ip)
# when they are installed, as a ratio. Targets: under 25 ms, under 20 MiB.
#
#   scripts/bench-inventory.sh [RUNS]        # default 50 runs
#
# Needs bash 5 (EPOCHREALTIME) and GNU time (Debian package "time") for RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/ironic-agent" ./cmd/ironic-agent
size=$(stat -c %s "$out/ironic-agent")

# wall RUNS CMD...: prints "median max" in milliseconds over RUNS execs.
wall() {
	local n=$1
	shift
	local -a ms=()
	for ((i = 0; i < n; i++)); do
		local t0=$EPOCHREALTIME
		"$@" >/dev/null 2>&1
		local t1=$EPOCHREALTIME
		ms+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b-a)*1000}')")
	done
	printf '%s\n' "${ms[@]}" | sort -n | awk '{v[NR]=$1} END{printf "%.1f %.1f\n", v[int((NR+1)/2)], v[NR]}'
}

# rss CMD...: peak RSS in KiB of one run (the largest of 5).
rss() {
	if [ ! -x /usr/bin/time ]; then
		echo "?"
		return
	fi
	local best=0
	for _ in 1 2 3 4 5; do
		local k
		k=$(/usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1)
		((k > best)) && best=$k
	done
	echo "$best"
}

"$out/ironic-agent" inventory >/dev/null # warm the page cache
read -r med max < <(wall "$runs" "$out/ironic-agent" inventory)
kib=$(rss "$out/ironic-agent" inventory)
echo "ironic-agent inventory: median ${med} ms, worst ${max} ms over ${runs} runs; peak RSS ${kib} KiB; binary ${size} bytes"

# The tools IPA execs for the same facts (IPA also runs lshw, udevadm and
# ipmitool, and pays Python's start-up on top).
if command -v lscpu >/dev/null && command -v lsblk >/dev/null && command -v ip >/dev/null; then
	tools() { lscpu -J && lsblk -bia --json -o KNAME,MODEL,SIZE,ROTA,TYPE,UUID,PARTUUID,SERIAL,WWN,LOG-SEC,PHY-SEC,TRAN && ip -j addr; }
	export -f tools
	read -r tmed _ < <(wall "$runs" bash -c tools)
	echo "lscpu + lsblk + ip (one shell): median ${tmed} ms; ironic-agent is $(awk -v a="$tmed" -v b="$med" 'BEGIN{printf "%.1f", a/b}')x faster"
fi
