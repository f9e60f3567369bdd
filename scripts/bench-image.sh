#!/usr/bin/env bash
# Image-writing benchmark: the same 2 GiB disk image, served by a local HTTP
# server, written onto a loop device by the tools a user would otherwise
# run and by `ironic-agent write-image` (sha256 verification on), in one
# run. Prints MB/s of disk content, the ratio to the reference, and the peak
# RSS and CPU time (user+system, of the whole pipeline) of each, then the
# same as METRIC lines (internal/testbed/metric) for scripts/perf-page.sh. The machine
# is shared, so wall-clock ratios move with the load; CPU seconds do not.
# The agent's time includes fsync (an image counts as written only once
# synced); the dd pipeline the issue names does not sync, so a dd with
# conv=fsync is timed too. Needs root (loop device), curl, qemu-img, zstd, /usr/bin/time.
#
#   sudo scripts/bench-image.sh     # env: BENCH_DIR (parent of the work dir, /var/tmp),
#                                   #      SIZE_MIB (2048), PORT (9390),
#                                   #      RUNS (1), ONLY (all, or raw), BASE (a git revision),
#                                   #      LOOP_DIO (unset, or 1)
#
# On a shared machine one run says little. RUNS=N repeats every measurement
# N times, interleaved (each round starts with a different one, so no
# command always runs first), prints each with the load average before it,
# and reports medians and the median of the per-round ratios. BASE=<rev>
# also builds ironic-agent at that revision and times it beside the
# current tree (A/B of a change, same rounds). ONLY=raw skips qcow2 and zstd.
#
# The image: 1 GiB of random bytes, 512 MiB of base64 text (compressible,
# like binaries and text in a real OS image), 512 MiB of zeros (free space).
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "bench-image.sh: needs root (loop devices)" >&2; exit 1; }
for t in curl dd qemu-img zstd losetup blkdiscard awk /usr/bin/time; do
	command -v "$t" >/dev/null || { echo "bench-image.sh: needs $t" >&2; exit 1; }
done

SIZE_MIB=${SIZE_MIB:-2048}
PORT=${PORT:-9390}
mkdir -p "${BENCH_DIR:-/var/tmp}"
BENCH_DIR=$(mktemp -d "${BENCH_DIR:-/var/tmp}/bench-image.XXXXXX")
LOOP=""
SERVER=""
cleanup() {
	[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
	rm -rf "$BENCH_DIR"
}
trap cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

log "building ironic-agent and the file server"
go build -o "$BENCH_DIR/ironic-agent" ./cmd/ironic-agent
go build -o "$BENCH_DIR/benchserve" ./tools/benchserve
if [ -n "${BASE:-}" ]; then
	log "building ironic-agent at $BASE"
	git worktree add -q --detach "$BENCH_DIR/base" "$BASE"
	(cd "$BENCH_DIR/base" && go build -o "$BENCH_DIR/ironic-agent-base" ./cmd/ironic-agent)
	git worktree remove --force "$BENCH_DIR/base"
fi
RUNS=${RUNS:-1}
ONLY=${ONLY:-all}

log "making a ${SIZE_MIB} MiB image in $BENCH_DIR"
srv="$BENCH_DIR/srv"
mkdir -p "$srv"
rnd=$((SIZE_MIB / 2)); txt=$((SIZE_MIB / 4))
{
	head -c "$((rnd << 20))" /dev/urandom
	head -c "$((txt * 3 / 4 << 20))" /dev/urandom | base64 -w 0 | head -c "$((txt << 20))"
} >"$srv/disk.raw"
truncate -s "${SIZE_MIB}M" "$srv/disk.raw"
files=(disk.raw)
if [ "$ONLY" != raw ]; then
	qemu-img convert -f raw -O qcow2 "$srv/disk.raw" "$srv/disk.qcow2"
	zstd -q -3 -T2 "$srv/disk.raw" -o "$srv/disk.raw.zst"
	files+=(disk.qcow2 disk.raw.zst)
fi
for f in "${files[@]}"; do
	sha256sum "$srv/$f" | cut -d' ' -f1 >"$srv/$f.sha256"
done

truncate -s "$((SIZE_MIB + 256))M" "$BENCH_DIR/loop.img"
# LOOP_DIO=1: the loop device does direct I/O on its backing file, as a
# disk has no page cache behind O_DIRECT: dd's writes then reach the disk
# too, instead of staying dirty in the backing file's page cache while
# the agent's fsync pays for writing its own back.
LOOP=$(losetup --find --show ${LOOP_DIO:+--direct-io=on} "$BENCH_DIR/loop.img")
"$BENCH_DIR/benchserve" -addr "127.0.0.1:$PORT" -dir "$srv" &
SERVER=$!
URL="http://127.0.0.1:$PORT"
for _ in $(seq 50); do curl -sf -o /dev/null -r 0-0 "$URL/disk.raw" && break; sleep 0.1; done
# Every run reads the image files from the page cache.
cat "$srv"/disk.* >/dev/null

# measure NAME CMD...: runs CMD with the device's old contents discarded
# and caches of the device dropped, prints "NAME seconds peakRSS_KiB user
# system load" (load: the 1-minute load average just before).
measure() {
	local name=$1 load; shift
	blkdiscard "$LOOP" 2>/dev/null || true
	sync; echo 1 >/proc/sys/vm/drop_caches
	cat "$srv"/disk.* >/dev/null
	load=$(cut -d' ' -f1 /proc/loadavg)
	if ! /usr/bin/time -f '%e %M %U %S' -o "$BENCH_DIR/time" "$@" >/dev/null 2>"$BENCH_DIR/err"; then
		cat "$BENCH_DIR/err" >&2
		echo "$name failed" >&2
		exit 1
	fi
	echo "$name $(tail -n1 "$BENCH_DIR/time") $load"
}

# agent BIN FILE: the write-image command line for one served file.
agent() { echo "$1" write-image --quiet --checksum "sha256:$(cat "$srv/$2.sha256")" "$URL/$2" "$LOOP"; }
verify() {
	local got
	got=$(head -c "$((SIZE_MIB << 20))" "$LOOP" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$(cat "$srv/disk.raw.sha256")" ] || { echo "device content differs after $1" >&2; exit 1; }
}

# run NAME: one measurement; the device is checked after the first round.
run() {
	local a=$BENCH_DIR/ironic-agent
	case $1 in
	dd-raw) measure "$1" sh -c "curl -sf '$URL/disk.raw' | dd of='$LOOP' bs=1M oflag=direct iflag=fullblock status=none" ;;
	dd-raw-fsync) measure "$1" sh -c "curl -sf '$URL/disk.raw' | dd of='$LOOP' bs=1M oflag=direct iflag=fullblock conv=fsync status=none" ;;
	agent-raw) measure "$1" $(agent "$a" disk.raw) ;;
	base-raw) measure "$1" $(agent "$BENCH_DIR/ironic-agent-base" disk.raw) ;;
	qemu-img-qcow2) measure "$1" qemu-img convert -f qcow2 -O host_device -t directsync -S 0 -W "$srv/disk.qcow2" "$LOOP" ;;
	agent-qcow2) measure "$1" $(agent "$a" disk.qcow2) ;;
	dd-zstd) measure "$1" sh -c "curl -sf '$URL/disk.raw.zst' | zstd -dc | dd of='$LOOP' bs=1M oflag=direct iflag=fullblock status=none" ;;
	agent-zstd) measure "$1" $(agent "$a" disk.raw.zst) ;;
	esac
	if [ "$round" = 1 ]; then verify "$1"; fi
}

names=(dd-raw dd-raw-fsync agent-raw)
[ -n "${BASE:-}" ] && names+=(base-raw)
[ "$ONLY" = raw ] || names+=(qemu-img-qcow2 agent-qcow2 dd-zstd agent-zstd)
log "commands: ${names[*]}; $RUNS round(s)"
results=()
for round in $(seq "$RUNS"); do
	k=$(((round - 1) % ${#names[@]}))
	for name in "${names[@]:k}" "${names[@]:0:k}"; do
		r=$(run "$name")
		log "round $round: $r"
		results+=("$round $r")
	done
done

bytes=$((SIZE_MIB << 20))
printf '%s\n' "${results[@]}" | awk -v bytes="$bytes" -v runs="$RUNS" '
	function median(list,    n, a, i, j, t) {
		n = split(list, a, " ")
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
	}
	{
		r = $1; n = $2
		if (!(n in seen)) { seen[n] = 1; order[++nn] = n }
		secs[n] = secs[n] " " $3; rss[n] = rss[n] " " $4; cpu[n] = cpu[n] " " ($5 + $6); load[n] = load[n] " " $7
		t[r, n] = $3
	}
	function mbs(n) { return bytes / median(secs[n]) / 1e6 }
	# rationum: the median of the per-round ratios of the times of a to b.
	function rationum(a, b,    r, l) {
		l = ""
		for (r = 1; r <= runs; r++) if ((r, a) in t && (r, b) in t) l = l " " (t[r, a] / t[r, b])
		return median(l)
	}
	function metric(name, value, unit, limit, target) {
		printf "METRIC name=%s value=%.4g unit=%s", name, value, unit
		if (limit != "") printf " limit=%.4g", limit
		if (target != "") printf " target=%.4g", target
		printf "\n"
	}
	function ratio(a, b,    r, l) {
		l = ""
		for (r = 1; r <= runs; r++) if ((r, a) in t && (r, b) in t) l = l " " sprintf("%.2f", t[r, a] / t[r, b])
		return l == "" ? "" : sprintf("%.2f (rounds: %s)", median(l), substr(l, 2))
	}
	END {
		printf "\n%d round(s); medians\n%-16s %8s %9s %12s %8s %6s\n", runs, "run", "seconds", "MB/s", "peak RSS MiB", "CPU s", "load"
		for (i = 1; i <= nn; i++) {
			n = order[i]; s = median(secs[n])
			printf "%-16s %8.2f %9.0f %12.1f %8.2f %6.2f\n", n, s, bytes / s / 1e6, median(rss[n]) / 1024, median(cpu[n]), median(load[n])
		}
		printf "\nratios (median of the per-round ratios):\n"
		printf "raw:   ironic-agent / dd pipeline       = %s  (target >= 0.85)\n", ratio("dd-raw", "agent-raw")
		printf "raw:   ironic-agent / dd with fsync     = %s\n", ratio("dd-raw-fsync", "agent-raw")
		if ("base-raw" in seen) {
			printf "raw:   base / dd pipeline               = %s\n", ratio("dd-raw", "base-raw")
			printf "raw:   ironic-agent / base              = %s\n", ratio("base-raw", "agent-raw")
		}
		if ("agent-qcow2" in seen) {
			printf "qcow2: ironic-agent / qemu-img convert  = %s\n", ratio("qemu-img-qcow2", "agent-qcow2")
			printf "qcow2: ironic-agent qcow2 / raw         = %s  (target >= 0.70)\n", ratio("agent-raw", "agent-qcow2")
			printf "zstd:  ironic-agent / zstd|dd pipeline  = %s\n", ratio("dd-zstd", "agent-zstd")
		}
		# The same figures as METRIC lines (internal/testbed/metric) for
		# tools/perfpage: MB/s of disk content with the reference of the same
		# run as the limit, the ratios with their targets, peak RSS, CPU.
		printf "\n"
		metric("image.raw.mb_s", mbs("agent-raw"), "MB/s", mbs("dd-raw"), 0.85 * mbs("dd-raw"))
		metric("image.raw.dd_mb_s", mbs("dd-raw"), "MB/s")
		metric("image.raw.dd_fsync_mb_s", mbs("dd-raw-fsync"), "MB/s")
		metric("image.raw.ratio", rationum("dd-raw", "agent-raw"), "x", "", 0.85)
		metric("image.raw.peak_rss", median(rss["agent-raw"]) / 1024, "MiB")
		metric("image.raw.cpu_s", median(cpu["agent-raw"]), "s", median(cpu["dd-raw"]))
		if ("base-raw" in seen) metric("image.raw.base_mb_s", mbs("base-raw"), "MB/s", mbs("dd-raw"))
		if ("agent-qcow2" in seen) {
			metric("image.qcow2.mb_s", mbs("agent-qcow2"), "MB/s", mbs("qemu-img-qcow2"), 0.70 * mbs("agent-raw"))
			metric("image.qcow2.ratio_to_raw", rationum("agent-raw", "agent-qcow2"), "x", "", 0.70)
			metric("image.qcow2.peak_rss", median(rss["agent-qcow2"]) / 1024, "MiB")
			metric("image.zstd.mb_s", mbs("agent-zstd"), "MB/s", mbs("dd-zstd"))
			metric("image.zstd.peak_rss", median(rss["agent-zstd"]) / 1024, "MiB")
		}
		metric("image.size", bytes / 1048576, "MiB")
	}'
