#!/usr/bin/env bash
# Measures the image writer's SHA-256 and SHA-512 (deploy/image
# BenchmarkImageHash) in MB per CPU second, so the figures do not move with
# the machine's load:
#   - agent: what the agent runs without fips=1 (its own assembly,
#     internal/fastsha2, where the CPU lacks AVX2; Go's crypto otherwise);
#   - fips_certified: FIPS mode with the Go Cryptographic Module v1.0.0 the
#     product links (GOFIPS140=certified, internal/ramdisk.BuildAgent);
#   - fips_latest: FIPS mode with the toolchain's current module;
# each on this CPU (native) and as on a CPU without AVX2 and SHA extensions
# such as QEMU's qemu64 (noext: GODEBUG cpu.avx2=off,cpu.sha=off). A FIPS
# figure's limit is the agent's on the same CPU setting, same run.
#
# One machine-readable line per figure:
#   METRIC name=hash.<algo>.<cpu>.<impl>_mb_cpu_s value=<number> unit=MB/cpu_s [limit=<number>]
#
#   scripts/bench-hash.sh [ROUNDS]     # default 200 (x 4 MiB per figure)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-200}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

go test -c -o "$out/latest.test" ./deploy/image
GOFIPS140=certified go test -c -o "$out/certified.test" ./deploy/image

# rate BINARY GODEBUG ALGO: the benchmark's MB/cpu-s.
rate() {
	# golang.org/x/sys/cpu, linked too, warns of cpu.sha, which the
	# standard library's internal/cpu honours.
	GODEBUG=$2 "$1" -test.run '^$' -test.bench "ImageHash/$3/" -test.benchtime "${rounds}x" 2>>"$out/stderr" |
		awk '$1 ~ /^BenchmarkImageHash/ { for (i = 2; i < NF; i++) if ($(i+1) == "MB/cpu-s") print $i }'
}

for algo in sha256 sha512; do
	for cpu in native noext; do
		ext=""
		[ "$cpu" = noext ] && ext="cpu.avx2=off,cpu.sha=off,"
		agent=$(rate "$out/latest.test" "${ext%,}" "$algo")
		certified=$(rate "$out/certified.test" "${ext}fips140=on" "$algo")
		latest=$(rate "$out/latest.test" "${ext}fips140=on" "$algo")
		[ -n "$agent" ] && [ -n "$certified" ] && [ -n "$latest" ] ||
			{ echo "bench-hash: no MB/cpu-s figure for $algo ($cpu)" >&2; cat "$out/stderr" >&2; exit 1; }
		echo "METRIC name=hash.$algo.$cpu.agent_mb_cpu_s value=$agent unit=MB/cpu_s"
		echo "METRIC name=hash.$algo.$cpu.fips_certified_mb_cpu_s value=$certified unit=MB/cpu_s limit=$agent"
		echo "METRIC name=hash.$algo.$cpu.fips_latest_mb_cpu_s value=$latest unit=MB/cpu_s limit=$agent"
	done
done
