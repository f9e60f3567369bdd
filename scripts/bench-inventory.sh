#!/usr/bin/env bash
# Measures `ironic-agent inventory` of this machine from exec to exit: wall
# time (median and p90 of N runs), CPU time and peak RSS, read from each
# child's rusage by tools/benchexec (no external tool needed). In the same
# run, in alternating rounds, it times two references: a static Go
# hello-world built here, the floor any Go program pays to start, and, when
# lscpu, lsblk and ip are installed, those three tools, which IPA runs for
# the same facts (IPA adds lshw, udevadm, ipmitool and Python's start-up).
# It prints the ratio of the inventory to each. Targets: under 25 ms and
# under 20 MiB.
#
# Besides the text it prints one machine-readable line per figure:
#   METRIC name=<dotted.name> value=<number> unit=<unit> [limit=<number>] [target=<number>]
# where limit is the reference measured in the same run.
#
#   scripts/bench-inventory.sh [RUNS]        # default 50
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# As the ramdisk build links it (internal/ramdisk.BuildAgent): the certified
# FIPS module.
CGO_ENABLED=0 GOFIPS140=certified go build -trimpath -ldflags='-s -w' -o "$out/ironic-agent" ./cmd/ironic-agent
go build -o "$out/benchexec" ./tools/benchexec
mkdir "$out/hello"
cat >"$out/hello/main.go" <<'HELLO'
package main

import "os"

func main() { os.Stdout.WriteString("hello, world\n") }
HELLO
printf 'module hello\n\ngo 1.22\n' >"$out/hello/go.mod"
(cd "$out/hello" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$out/hello-world" .)
# Each program is timed as a copy written by cp, as the ramdisk's is
# unpacked from the initramfs: a file the Go linker has just written out
# through mmap starts measurably slower from the page cache than the same
# bytes written with write(2), which would weigh on the figures of this
# fresh build and not on the ramdisk's.
for prog in ironic-agent hello-world; do
	cp "$out/$prog" "$out/$prog.copy"
	mv "$out/$prog.copy" "$out/$prog"
done
size=$(stat -c %s "$out/ironic-agent")
echo "binary: $size bytes (static, stripped); $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# field KEY LINE: the value of KEY=... in a benchexec line.
field() { sed -n "s/.*[[:space:]]$1=\([0-9.]*\).*/\1/p" <<<" $2"; }
# ratio A B: A/B to two decimals, "" when B is zero.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b > 0) printf "%.2f", a/b}'; }
metric() { echo "METRIC name=$1 value=$2 unit=$3${4:+ limit=$4}${5:+ target=$5}"; }

"$out/ironic-agent" inventory >/dev/null # warm the page cache
"$out/hello-world" >/dev/null
have_tools=""
if command -v lscpu >/dev/null && command -v lsblk >/dev/null && command -v ip >/dev/null; then
	have_tools=1
	cat >"$out/tools.sh" <<'TOOLS'
lscpu -J >/dev/null
lsblk -bia --json -o KNAME,MODEL,SIZE,ROTA,TYPE,UUID,PARTUUID,SERIAL,WWN,LOG-SEC,PHY-SEC,TRAN >/dev/null
ip -j addr >/dev/null
TOOLS
fi

# The three are timed in alternating rounds, so a change of load during
# the run weighs on each alike; each figure is the median of the rounds'.
rounds=5
per=$(((runs + rounds - 1) / rounds))
for _ in $(seq "$rounds"); do
	"$out/benchexec" -n "$per" -- "$out/ironic-agent" inventory >>"$out/ours.txt"
	"$out/benchexec" -n "$per" -- "$out/hello-world" >>"$out/hello.txt"
	if [ -n "$have_tools" ]; then
		"$out/benchexec" -n "$per" -- bash "$out/tools.sh" >>"$out/theirs.txt"
	fi
done
# summary FILE: one benchexec-style line of the rounds' medians (peak RSS:
# the largest).
summary() {
	awk '
	function med(k,   n, i, j, t, a) {
		n = split(vals[k], a, " ")
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{
		for (i = 1; i <= NF; i++) {
			split($i, kv, "=")
			if (kv[1] == "runs") runs += kv[2]
			else if (kv[1] == "peak_rss_kib") { if (kv[2] + 0 > rss) rss = kv[2] + 0 }
			else if (kv[1] != "wall_ms_max") vals[kv[1]] = vals[kv[1]] " " kv[2]
		}
	}
	END {
		printf "runs=%d rounds=%d wall_ms_median=%.1f wall_ms_p90=%.1f cpu_ms_median=%.1f peak_rss_kib=%d\n",
			runs, NR, med("wall_ms_median"), med("wall_ms_p90"), med("cpu_ms_median"), rss
	}' "$1"
}
ours=$(summary "$out/ours.txt")
hello=$(summary "$out/hello.txt")
echo "ironic-agent inventory: $ours"
echo "Go hello-world:         $hello"
theirs=""
if [ -n "$have_tools" ]; then
	theirs=$(summary "$out/theirs.txt")
	echo "lscpu + lsblk + ip:     $theirs"
fi

wall=$(field wall_ms_median "$ours")
cpu=$(field cpu_ms_median "$ours")
hwall=$(field wall_ms_median "$hello")
echo "inventory / hello-world (median wall): $(ratio "$wall" "$hwall")x"
twall="" tcpu=""
if [ -n "$theirs" ]; then
	twall=$(field wall_ms_median "$theirs")
	tcpu=$(field cpu_ms_median "$theirs")
	echo "inventory / (lscpu + lsblk + ip) (median wall): $(ratio "$wall" "$twall")x"
fi

metric inventory.wall_ms_median "$wall" ms "$twall" 25
metric inventory.wall_ms_p90 "$(field wall_ms_p90 "$ours")" ms "$(field wall_ms_p90 "$theirs")"
metric inventory.cpu_ms_median "$cpu" ms "$tcpu"
metric inventory.peak_rss_mib "$(awk -v k="$(field peak_rss_kib "$ours")" 'BEGIN{printf "%.1f", k/1024}')" MiB "" 20
metric inventory.hello_floor_ms "$hwall" ms
metric inventory.hello_floor_cpu_ms "$(field cpu_ms_median "$hello")" ms
metric inventory.ratio_to_hello "$(ratio "$wall" "$hwall")" x
if [ -n "$theirs" ]; then
	metric inventory.tools_wall_ms_median "$twall" ms
	metric inventory.ratio_to_tools "$(ratio "$wall" "$twall")" x 1
fi
# What the package initialisers cost before main runs (GODEBUG=inittrace=1):
# their summed clock time (median of 11 starts) and allocations, and the
# five dearest, for the one profile a start-up change needs first.
for _ in $(seq 11); do
	GODEBUG=inittrace=1 "$out/ironic-agent" inventory 2>&1 >/dev/null | grep '^init ' >"$out/inittrace.txt" || true
	awk '{c += $5; a += $10} END {printf "%.3f %d\n", c, a}' "$out/inittrace.txt" >>"$out/init.txt"
done
init_ms=$(sort -n "$out/init.txt" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
init_allocs=$(awk '{print $2}' "$out/init.txt" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
echo "package initialisers: ${init_ms} ms, ${init_allocs} allocations; the dearest (last start):"
awk '{printf "%s %s %s\n", $5, $2, $10}' "$out/inittrace.txt" | sort -rn | head -5 | awk '{printf "  %-60s %s ms, %s allocs\n", $2, $1, $3}'
metric inventory.init_ms "$init_ms" ms
metric inventory.init_allocs "$init_allocs" allocs
metric agent.binary_mib "$(awk -v s="$size" 'BEGIN{printf "%.1f", s/1048576}')" MiB
