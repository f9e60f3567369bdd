#!/usr/bin/env bash
# Times the erase clean steps against the commands IPA runs for them, in one
# run, on a loop device over a sparse file (never a real disk): wall time,
# CPU time and peak RSS from each child's rusage (tools/benchexec).
#
#   full erase:     shred --force --zero --verbose --iterations 1 DEV   (IPA's _shred_block_device)
#                   vs ironic-agent erase DEV --full --iterations 1
#   metadata wipe:  wipefs --force --all; dd 33x512 at both ends; sgdisk -Z   (IPA's destroy_disk_metadata)
#                   vs ironic-agent erase DEV --metadata
#   express erase:  ironic-agent erase DEV --express (discard + metadata wipe on a loop device)
#
# Needs root (losetup). The loop device uses direct I/O on its backing file
# so writes reach the file system rather than only the page cache.
#
#   scripts/bench-erase.sh [SIZE_MIB] [RUNS]      # default 512 MiB, 3 runs
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-512}
runs=${2:-3}
[ "$(id -u)" = 0 ] || { echo "bench-erase: needs root (loop devices)" >&2; exit 1; }
out=$(mktemp -d)
dev=
cleanup() { [ -n "$dev" ] && losetup -d "$dev" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT

CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/ironic-agent" ./cmd/ironic-agent
go build -o "$out/benchexec" ./tools/benchexec
truncate -s "${size}M" "$out/disk.img"
dev=$(losetup --find --show --direct-io=on "$out/disk.img")
echo "device: $dev over a ${size} MiB sparse file (direct I/O); $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"

cat >"$out/ipa-metadata.sh" <<META
set -e
wipefs --force --all $dev >/dev/null
ss=\$(blockdev --getss $dev); n=33; [ "\$ss" = 4096 ] && n=5
sectors=\$(( \$(blockdev --getsize64 $dev) / ss ))
dd bs=\$ss if=/dev/zero of=$dev count=\$n oflag=direct status=none
dd bs=\$ss if=/dev/zero of=$dev count=\$n seek=\$(( sectors - n )) oflag=direct status=none
sgdisk -Z $dev >/dev/null 2>&1 || true
META

wall() { sed -n 's/.*wall_ms_median=\([0-9.]*\).*/\1/p' <<<"$1"; }
ratio() { awk -v a="$(wall "$1")" -v b="$(wall "$2")" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }

shred_r=$("$out/benchexec" -n "$runs" -- shred --force --zero --iterations 1 "$dev")
ours_r=$("$out/benchexec" -n "$runs" -- "$out/ironic-agent" erase "$dev" --full --iterations 1 --yes)
mb=$(( size * 2 ))
echo "full erase, 1 random + 1 zero pass ($mb MiB written):"
echo "  shred (IPA):          $shred_r"
echo "  ironic-agent --full:  $ours_r"
echo "  speed-up (shred wall / ours): $(ratio "$shred_r" "$ours_r")x"

ipa_m=$("$out/benchexec" -n "$runs" -- bash "$out/ipa-metadata.sh")
ours_m=$("$out/benchexec" -n "$runs" -- "$out/ironic-agent" erase "$dev" --metadata --yes)
echo "metadata wipe:"
echo "  wipefs+dd+sgdisk (IPA): $ipa_m"
echo "  ironic-agent --metadata: $ours_m"
echo "  speed-up: $(ratio "$ipa_m" "$ours_m")x"

ours_e=$("$out/benchexec" -n "$runs" -- "$out/ironic-agent" erase "$dev" --express --yes)
echo "express erase (discard + metadata wipe):"
echo "  ironic-agent --express: $ours_e"
