#!/usr/bin/env bash
# Boots IPA 13's ramdisk (Debian forky's ironic-python-agent 13.0.0, built by
# internal/vmtest/iparamdisk and cached) and ours on the same QEMU machine
# against the same Ironic, in one run, and prints the numbers of the README's
# "IPA 13 side by side" table and the field-by-field comparison of the
# stored inspection data (TestVMIPASideBySide in e2e/vm).
#
# Needs root (debootstrap, network namespaces for lldpd) and the packages of
# test.sh. The first run builds IPA's root filesystem (about 6 min) and the
# initramfs; later runs take them from the cache.
#
#   scripts/ipa-side-by-side.sh              # Ironic 2026.1, its own inspection
#   IRONIC_SERIES=2023.1 scripts/ipa-side-by-side.sh   # ironic-inspector; no cleaning
#                                            # (IPA 13 needs the token on Ironic's GETs)
#   E2E_PORT_OFFSET=N moves e2e/vm's fixed ports, as for go test ./e2e/vm.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "ipa-side-by-side: needs root" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export IRONIC_SERIES=${IRONIC_SERIES:-2026.1}
echo "$(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); Ironic series $IRONIC_SERIES"
status=0
IPA_SIDE_BY_SIDE=1 go test -count=1 -v -timeout 90m -run '^TestVMIPASideBySide$' ./e2e/vm >"$log" 2>&1 || status=$?
grep -E 'numbers:|allowed \(|unexplained|^\s*(--- |ok|FAIL|PASS)' "$log" || true
[ "$status" = 0 ] || { echo "--- the whole log:"; cat "$log"; }
exit "$status"
