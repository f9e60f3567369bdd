#!/usr/bin/env bash
# Image-writing benchmark: the same 2 GiB disk image, served by a local HTTP
# server, written onto a loop device by the tools a user would otherwise
# run and by `ironic-agent write-image` (sha256 verification on), in one
# run. Prints MB/s of disk content, the ratio to the reference, and the peak
# RSS and CPU time (user+system, of the whole pipeline) of each. The machine
# is shared, so wall-clock ratios move with the load; CPU seconds do not.
# The agent's time includes fsync (an image counts as written only once
# synced); the dd pipeline the issue names does not sync, so a dd with
# conv=fsync is timed too. Needs root (loop device), curl, qemu-img, zstd, /usr/bin/time.
#
#   sudo scripts/bench-image.sh     # env: BENCH_DIR (parent of the work dir, /var/tmp),
#                                   #      SIZE_MIB (2048), PORT (9390)
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
go build -o "$BENCH_DIR/benchserve" ./scripts/benchserve

log "making a ${SIZE_MIB} MiB image in $BENCH_DIR"
srv="$BENCH_DIR/srv"
mkdir -p "$srv"
rnd=$((SIZE_MIB / 2)); txt=$((SIZE_MIB / 4))
{
	head -c "$((rnd << 20))" /dev/urandom
	head -c "$((txt * 3 / 4 << 20))" /dev/urandom | base64 -w 0 | head -c "$((txt << 20))"
} >"$srv/disk.raw"
truncate -s "${SIZE_MIB}M" "$srv/disk.raw"
qemu-img convert -f raw -O qcow2 "$srv/disk.raw" "$srv/disk.qcow2"
zstd -q -3 -T2 "$srv/disk.raw" -o "$srv/disk.raw.zst"
for f in disk.raw disk.qcow2 disk.raw.zst; do
	sha256sum "$srv/$f" | cut -d' ' -f1 >"$srv/$f.sha256"
done

truncate -s "$((SIZE_MIB + 256))M" "$BENCH_DIR/loop.img"
LOOP=$(losetup --find --show "$BENCH_DIR/loop.img")
"$BENCH_DIR/benchserve" -addr "127.0.0.1:$PORT" -dir "$srv" &
SERVER=$!
URL="http://127.0.0.1:$PORT"
for _ in $(seq 50); do curl -sf -o /dev/null -r 0-0 "$URL/disk.raw" && break; sleep 0.1; done
# Every run reads the image files from the page cache.
cat "$srv"/disk.* >/dev/null

# measure NAME CMD...: runs CMD with the device's old contents discarded
# and caches of the device dropped, prints "NAME seconds peakRSS_KiB user system".
measure() {
	local name=$1; shift
	blkdiscard "$LOOP" 2>/dev/null || true
	sync; echo 1 >/proc/sys/vm/drop_caches
	cat "$srv"/disk.* >/dev/null
	if ! /usr/bin/time -f '%e %M %U %S' -o "$BENCH_DIR/time" "$@" >/dev/null 2>"$BENCH_DIR/err"; then
		cat "$BENCH_DIR/err" >&2
		echo "$name failed" >&2
		exit 1
	fi
	echo "$name $(tail -n1 "$BENCH_DIR/time")"
}

# agent FILE: the write-image command line for one served file.
agent() { echo "$BENCH_DIR/ironic-agent" write-image --quiet --checksum "sha256:$(cat "$srv/$1.sha256")" "$URL/$1" "$LOOP"; }
verify() {
	local got
	got=$(head -c "$((SIZE_MIB << 20))" "$LOOP" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$(cat "$srv/disk.raw.sha256")" ] || { echo "device content differs after $1" >&2; exit 1; }
}

results=()
log "raw: curl | dd bs=1M oflag=direct"
results+=("$(measure dd-raw sh -c "curl -sf '$URL/disk.raw' | dd of='$LOOP' bs=1M oflag=direct iflag=fullblock status=none")")
verify dd-raw
log "raw: curl | dd bs=1M oflag=direct conv=fsync (durable, as the agent's write is)"
results+=("$(measure dd-raw-fsync sh -c "curl -sf '$URL/disk.raw' | dd of='$LOOP' bs=1M oflag=direct iflag=fullblock conv=fsync status=none")")
verify dd-raw-fsync
log "raw: ironic-agent write-image (sha256)"
results+=("$(measure agent-raw $(agent disk.raw))")
verify agent-raw
log "qcow2: qemu-img convert of a local file (IPA's flags)"
results+=("$(measure qemu-img-qcow2 qemu-img convert -f qcow2 -O host_device -t directsync -S 0 -W "$srv/disk.qcow2" "$LOOP")")
verify qemu-img
log "qcow2: ironic-agent write-image over HTTP (sha256)"
results+=("$(measure agent-qcow2 $(agent disk.qcow2))")
verify agent-qcow2
log "zstd: curl | zstd -d | dd bs=1M oflag=direct"
results+=("$(measure dd-zstd sh -c "curl -sf '$URL/disk.raw.zst' | zstd -dc | dd of='$LOOP' bs=1M oflag=direct iflag=fullblock status=none")")
verify dd-zstd
log "zstd: ironic-agent write-image over HTTP (sha256)"
results+=("$(measure agent-zstd $(agent disk.raw.zst))")
verify agent-zstd

bytes=$((SIZE_MIB << 20))
printf '%s\n' "${results[@]}" | awk -v bytes="$bytes" '
	{ name[NR] = $1; secs[$1] = $2; rss[NR] = $3; cpu[NR] = $4 + $5 }
	END {
		printf "\n%-16s %8s %9s %12s %8s\n", "run", "seconds", "MB/s", "peak RSS MiB", "CPU s"
		for (i = 1; i <= NR; i++)
			printf "%-16s %8.2f %9.0f %12.1f %8.2f\n", name[i], secs[name[i]], bytes / secs[name[i]] / 1e6, rss[i] / 1024, cpu[i]
		printf "\nraw:   ironic-agent / dd pipeline       = %.2f  (target >= 0.85)\n", secs["dd-raw"] / secs["agent-raw"]
		printf "raw:   ironic-agent / dd with fsync     = %.2f\n", secs["dd-raw-fsync"] / secs["agent-raw"]
		printf "qcow2: ironic-agent / qemu-img convert  = %.2f\n", secs["qemu-img-qcow2"] / secs["agent-qcow2"]
		printf "qcow2: ironic-agent qcow2 / raw         = %.2f  (target >= 0.70)\n", secs["agent-raw"] / secs["agent-qcow2"]
		printf "zstd:  ironic-agent / zstd|dd pipeline  = %.2f\n", secs["dd-zstd"] / secs["agent-zstd"]
	}'
