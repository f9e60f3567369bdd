#!/usr/bin/env bash
# build-ramdisk.sh [mkramdisk flags] - the same as `make ramdisk`:
# build/ramdisk/ironic-agent.kernel and build/ramdisk/ironic-agent.initramfs
# (add -iso for build/ramdisk/ironic-agent.iso). The kernel package is
# downloaded once with apt-get download into $IRONIC_AGENT_CACHE (default
# $XDG_CACHE_HOME/ironic-agent or ~/.cache/ironic-agent). No root needed;
# needs apt (package lists present: apt-get update), dpkg-deb and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./cmd/mkramdisk -out build/ramdisk "$@"
