#!/usr/bin/env bash
# Boots IPA 13's ramdisk (Debian forky's ironic-python-agent 13.0.0, built by
# internal/testbed/ipa and cached) and ours on the same QEMU machine
# against the same Ironic, and prints the side-by-side figures (METRIC lines
# for docs/performance.md) and the field-by-field comparisons, from the tests of
# e2e/vm (all behind IPA_SIDE_BY_SIDE=1):
#
#   TestVMIPASideBySide  inspection data compared (SeaBIOS and OVMF); ramdisk
#                        size (packed and unpacked), first heartbeat,
#                        inspection, metadata cleaning
#   TestVMIPASteps       get_clean/deploy/service_steps, get_partition_uuids,
#                        a bad-checksum prepare_image, unknown commands; time
#                        to a serving API
#   TestVMIPADeploy      inspect + clean + deploy of a 1 GiB qcow2 and raw
#                        image in one boot (fast track), 3 GiB; where the
#                        deploy's time went (each agent's own log lines);
#                        peak memory (IPA: VmHWM and its unit's cgroup peak)
#   TestVMIPAMemory      the smallest memory that completes the qcow2 flow,
#                        bisected ($IPA_SIDE_MEMORY_STEPS boots per agent)
#
# Every side-by-side figure is on a METRIC line of this output (the memory
# bisection's tries on its "<agent> at <N> MiB:" lines); scripts/perf-page.sh
# puts them on docs/performance.md.
#
# Needs root (debootstrap, network namespaces for lldpd) and the packages of
# test.sh. The first run builds IPA's root filesystem (about 8 min) and the
# initramfs; later runs take them from the cache. Under TCG each of the
# four tests takes tens of minutes (docs/testing.md: IPA side by side).
#
#   IPA_SIDE_DEPLOY_RUNS=ipa:qcow2,ours:raw  picks TestVMIPADeploy's runs
#   IPA_SIDE_MEMORY_STEPS=N                  TestVMIPAMemory's boots per agent
#   IPA_SIDE_MEMORY_AGENTS=ours              TestVMIPAMemory's agents (ipa,ours)
#
#   scripts/ipa-side-by-side.sh                      # all four, Ironic 2026.1
#   IPA_SIDE_TESTS='Steps|Deploy' scripts/ipa-side-by-side.sh   # some of them
#   IRONIC_SERIES=2023.1 scripts/ipa-side-by-side.sh # ironic-inspector; no
#       cleaning or deploy (IPA 13 needs the token on Ironic's GETs)
#   E2E_PORT_OFFSET=N moves e2e/vm's fixed ports, as for go test ./e2e/vm.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "ipa-side-by-side: needs root" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export IRONIC_SERIES=${IRONIC_SERIES:-2026.1}
tests=${IPA_SIDE_TESTS:-SideBySide|Steps|Deploy|Memory}
echo "$(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); Ironic series $IRONIC_SERIES; tests TestVMIPA($tests)"
status=0
IPA_SIDE_BY_SIDE=1 go test -count=1 -v -timeout 240m -run "^TestVMIPA($tests)\$" ./e2e/vm >"$log" 2>&1 || status=$?
grep -E 'numbers:|at [0-9]+ MiB:|allowed \(|unexplained|^\s*(--- |ok|FAIL|PASS)' "$log" || true
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$status" = 0 ] || { echo "--- the whole log:"; cat "$log"; }
exit "$status"
