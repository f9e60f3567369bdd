#!/usr/bin/env bash
# Regenerates docs/performance.md from figures measured now: runs
# scripts/bench-inventory.sh and scripts/bench-hash.sh, builds the amd64 and
# arm64 ramdisks (their sizes) and, as root,
# scripts/bench-image.sh, keeps
# their output, adds the METRIC lines of the latest ./test.sh run, and runs
# tools/perfpage, which stamps the page with the commit, the date and the
# machine. Nobody types a figure into the page.
#
# Files named as arguments add their METRIC lines after the test run's:
# the output of a run with E2E_VM_SLOW=1, such as
# `E2E_VM_SLOW=1 go test -v -run TestVMArm64Lifecycle ./e2e/vm`, whose
# vm.arm64.boot_to_heartbeat_s row goes beside amd64's with its floor.
#
#   scripts/perf-page.sh [FILE...]
#                            # env: METRICS_DIR (a ./test.sh run's metrics;
#                            #      default: the newest /tmp/ironic-agent-metrics.*),
#                            #      PERF_DIR (where the scripts' output is kept;
#                            #      default: a new /tmp/ironic-agent-perf.*),
#                            #      INVENTORY_RUNS (100), SKIP_IMAGE (set: no image
#                            #      benchmark), IMAGE_OUT (an earlier bench-image.sh
#                            #      output to use instead of running it), and
#                            #      bench-image.sh's (SIZE_MIB, RUNS, ...)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '== %s\n' "$*" >&2; }

PERF_DIR=${PERF_DIR:-$(mktemp -d /tmp/ironic-agent-perf.XXXXXX)}
mkdir -p "$PERF_DIR"
files=()

log "scripts/bench-inventory.sh ${INVENTORY_RUNS:-100} > $PERF_DIR/bench-inventory.out"
scripts/bench-inventory.sh "${INVENTORY_RUNS:-100}" | tee "$PERF_DIR/bench-inventory.out"
files+=("$PERF_DIR/bench-inventory.out")

log "scripts/bench-hash.sh > $PERF_DIR/bench-hash.out"
scripts/bench-hash.sh | tee "$PERF_DIR/bench-hash.out"
files+=("$PERF_DIR/bench-hash.out")

# The ramdisk an operator boots (make ramdisk): its kernel and initramfs.
log "go run ./cmd/mkramdisk -out $PERF_DIR/ramdisk"
go run ./cmd/mkramdisk -out "$PERF_DIR/ramdisk" >"$PERF_DIR/mkramdisk.log" 2>&1 ||
	{ cat "$PERF_DIR/mkramdisk.log" >&2; exit 1; }
mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.2f", b / 1048576 }'; }
kernel_mib=$(mib "$PERF_DIR/ramdisk/ironic-agent.kernel")
initramfs_mib=$(mib "$PERF_DIR/ramdisk/ironic-agent.initramfs")
{
	echo "METRIC name=ramdisk.kernel_mib value=$kernel_mib unit=MiB"
	echo "METRIC name=ramdisk.initramfs_mib value=$initramfs_mib unit=MiB"
	echo "METRIC name=ramdisk.total_mib value=$(awk -v a="$kernel_mib" -v b="$initramfs_mib" 'BEGIN { printf "%.2f", a + b }') unit=MiB"
} | tee "$PERF_DIR/ramdisk.out"
files+=("$PERF_DIR/ramdisk.out")

# The arm64 ramdisk (make ramdisk ARCH=arm64), built on this host the same way.
log "go run ./cmd/mkramdisk -arch arm64 -out $PERF_DIR/ramdisk-arm64"
go run ./cmd/mkramdisk -arch arm64 -out "$PERF_DIR/ramdisk-arm64" >"$PERF_DIR/mkramdisk-arm64.log" 2>&1 ||
	{ cat "$PERF_DIR/mkramdisk-arm64.log" >&2; exit 1; }
kernel_mib=$(mib "$PERF_DIR/ramdisk-arm64/ironic-agent.kernel")
initramfs_mib=$(mib "$PERF_DIR/ramdisk-arm64/ironic-agent.initramfs")
{
	echo "METRIC name=ramdisk.arm64.kernel_mib value=$kernel_mib unit=MiB"
	echo "METRIC name=ramdisk.arm64.initramfs_mib value=$initramfs_mib unit=MiB"
	echo "METRIC name=ramdisk.arm64.total_mib value=$(awk -v a="$kernel_mib" -v b="$initramfs_mib" 'BEGIN { printf "%.2f", a + b }') unit=MiB"
} | tee "$PERF_DIR/ramdisk-arm64.out"
files+=("$PERF_DIR/ramdisk-arm64.out")

if [ -n "${IMAGE_OUT:-}" ]; then
	[ -s "$IMAGE_OUT" ] || { log "IMAGE_OUT=$IMAGE_OUT: no such file or empty"; exit 1; }
	log "image benchmark from $IMAGE_OUT (IMAGE_OUT)"
	files+=("$IMAGE_OUT")
elif [ -n "${SKIP_IMAGE:-}" ]; then
	log "SKIP_IMAGE set: no image benchmark"
elif [ "$(id -u)" != 0 ]; then
	log "not root: no image benchmark (it needs loop devices)"
else
	log "scripts/bench-image.sh > $PERF_DIR/bench-image.out"
	scripts/bench-image.sh | tee "$PERF_DIR/bench-image.out"
	files+=("$PERF_DIR/bench-image.out")
fi

# The main round first: a figure found in several files is taken from the
# first (tools/perfpage), and the rounds against other Ironic series only
# add the scenarios the main round skips.
if [ -z "${METRICS_DIR:-}" ]; then
	METRICS_DIR=$(ls -dt /tmp/ironic-agent-metrics.* 2>/dev/null | head -n1 || true)
fi
if [ -n "$METRICS_DIR" ] && [ -s "$METRICS_DIR/go-test.metrics" ]; then
	log "test metrics from $METRICS_DIR"
	files+=("$METRICS_DIR/go-test.metrics")
	for f in "$METRICS_DIR"/*.metrics; do
		[ "$f" = "$METRICS_DIR/go-test.metrics" ] || files+=("$f")
	done
else
	log "no ./test.sh metrics found (METRICS_DIR=${METRICS_DIR:-unset}): the page has no test figures"
fi

for f in "$@"; do
	[ -s "$f" ] || { log "$f: no such file or empty"; exit 1; }
	log "figures from $f"
	files+=("$f")
done

go run ./tools/perfpage -o docs/performance.md "${files[@]}"
log "outputs kept in $PERF_DIR"
