#!/usr/bin/env bash
# The whole test suite, from a fresh clone on Debian: installs what the tests
# need (apt packages as root, Go tools with go install), then runs the gofmt
# check, go vet, staticcheck and every test with the race detector, between
# two snapshots of the host (tools/hostguard) that must not differ.
# Tests that need root, loop devices, namespaces, lldpd, QEMU or Debian's Ironic
# run when this script runs as root (as CI does) and skip loudly otherwise.
set -euo pipefail
cd "$(dirname "$0")"

# sudo's secure_path drops /usr/local/go/bin, where Go's own archive installs
# go, so `sudo ./test.sh` would not find the Go the user has.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null; then
	printf '== go not found on PATH nor in /usr/local/go/bin: install Go 1.26 first\n' >&2
	exit 1
fi

STATICCHECK_VERSION=v0.8.2
# Ironic series the end-to-end packages (e2e, e2e/vm) run against again after
# the main run, each from its cached Debian root filesystem (docs/testing.md); the main run uses
# $IRONIC_SERIES (default 2023.1, the host's packages). Empty skips them.
IRONIC_SERIES_EXTRA=${IRONIC_SERIES_EXTRA-2026.1}
# Debian packages the tests use. Keep one per line, sorted.
APT_PACKAGES=(
	btrfs-progs
	busybox-static
	bzip2
	cpio
	curl
	debootstrap
	faketime
	dmidecode
	dnsmasq-base
	dosfstools
	e2fsprogs
	fio
	gdisk
	genisoimage
	grub-common
	grub-efi-amd64-bin
	grub-pc-bin
	grub2-common
	iproute2
	ipmitool
	ironic-api
	ironic-conductor
	ironic-inspector
	isolinux
	lldpd
	lshw
	mdadm
	mount
	mtools
	openipmi
	openssh-client
	openssl
	ovmf
	parted
	python3-ironic
	python3-ironic-inspector
	python3-sushy
	qemu-efi-aarch64
	qemu-system-arm
	qemu-system-x86
	qemu-utils
	syslinux-common
	tcpdump
	time
	udev
	umoci
	util-linux
	xfsprogs
	xorriso
	xz-utils
	zstd
)

log() { printf '== %s\n' "$*" >&2; }

install_packages() {
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		log "not root or no apt-get: skipping package installation; tests needing them will say so"
		return
	fi
	local missing=()
	for p in "${APT_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if [ "${#missing[@]}" -eq 0 ]; then
		log "all ${#APT_PACKAGES[@]} Debian packages present"
		return
	fi
	log "installing Debian packages: ${missing[*]}"
	# Maintainer scripts must not start daemons (tftpd-hpa, lldpd, ...): the
	# tests start what they need themselves.
	local made_policy=0
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		made_policy=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	# Ironic's and ironic-inspector's maintainer scripts would offer to set up
	# a database, RabbitMQ and Keystone; the tests run them on sqlite with
	# noauth, so every such question is answered "no" up front.
	debconf-set-selections <<-'EOF'
		ironic-common ironic/configure_db boolean false
		ironic-common ironic/ksat-create-service-user boolean false
		ironic-api ironic/configure_api-endpoint boolean false
		ironic-inspector ironic-inspector/configure_db boolean false
		ironic-inspector ironic-inspector/configure_api-endpoint boolean false
		ironic-inspector ironic-inspector/ksat-create-service-user boolean false
	EOF
	apt-get -o DPkg::Lock::Timeout=900 update -qq
	apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
}

install_go_tools() {
	GOBIN="$(go env GOPATH)/bin"
	export PATH="$GOBIN:$PATH"
	if ! staticcheck -version 2>/dev/null | grep -q "(${STATICCHECK_VERSION#v})"; then
		log "installing staticcheck $STATICCHECK_VERSION"
		GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	fi
}

install_packages
install_go_tools

log "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	printf 'gofmt would change:\n%s\n' "$unformatted" >&2
	exit 1
fi
# The docs first, as they take seconds and the test rounds an hour: the
# README and the guides carry no dates, loads, timings or narration
# (tools/doccheck), and the generated references match the code
# (tools/refdocs; its golden test runs again in the rounds below).
log "docs"
go run ./tools/doccheck
go run ./tools/refdocs -check
log "go vet"
go vet ./...
log "staticcheck"
staticcheck ./...
# The host guard (docs/testing.md): a record of what the suite must not
# change, taken after the installs above and again after the tests, whether
# they passed or not; any difference fails the run, each one named.
guard_dir=$(mktemp -d /tmp/hostguard.XXXXXX)
go build -o "$guard_dir/hostguard" ./tools/hostguard
# Every process the suite starts inherits this mark; one still carrying it
# after the tests was left running.
HOSTGUARD_RUN="$$-$(date +%s%N)"
export HOSTGUARD_RUN
if [ "$(id -u)" != 0 ]; then
	log "not root: the host guard compares what root alone may read (/etc/shadow, other users' processes) by name only"
fi
log "host guard: snapshot before the tests"
"$guard_dir/hostguard" snapshot -o "$guard_dir/before.json"

# Each go test round goes through tools/testsummary, which prints what a
# plain go test prints, then the round's slowest packages and tests, so
# that CI's log says where the time went (-v among the arguments: every
# test's output, as go test -v prints it).
tools_dir=$(mktemp -d /tmp/ironic-agent-test-tools.XXXXXX)
trap 'rm -rf "$tools_dir"' EXIT
go build -o "$tools_dir/testsummary" ./tools/testsummary
# The figures the tests measure (METRIC lines, internal/testbed/metric)
# go to one file per round in $METRICS_DIR, kept after the run for
# scripts/perf-page.sh, which makes docs/performance.md of them.
if [ -z "${METRICS_DIR:-}" ]; then
	METRICS_DIR=$(mktemp -d /tmp/ironic-agent-metrics.XXXXXX)
fi
mkdir -p "$METRICS_DIR"
METRICS_DIR=$(cd "$METRICS_DIR" && pwd)
log "metrics of this run go to $METRICS_DIR"
summary_flags=(-top 15)
for arg in "$@"; do
	case "$arg" in -v | -v=true | -test.v | -test.v=true) summary_flags+=(-all) ;; esac
done
# go_test_round NAME TAG ARGS...: go test -json ARGS through the summary,
# the round's METRIC lines to $METRICS_DIR/TAG.metrics, then the round's
# wall time; returns go test's status.
go_test_round() {
	local name=$1 tag=$2 start=$SECONDS status=0
	shift 2
	log "$name"
	go test -json "$@" | "$tools_dir/testsummary" "${summary_flags[@]}" -metrics "$METRICS_DIR/$tag.metrics" || status=$?
	log "$name: $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
	return "$status"
}

test_status=0
# go test runs its packages in the order given, two at a time on CI's two
# cores: the longest (e2e/vm, about half the round) first, so that the
# others share the second core beside it rather than leave it idle at the end.
go_test_round "go test -race" go-test -race -count=1 -timeout 40m "$@" \
	./e2e/vm/ ./e2e/ ./e2e/ramdisk/ ./internal/ramdisk/rdinit/netup/ ./e2e/faildisk/ ./... || test_status=$?
if [ "$(id -u)" = 0 ]; then
	# After the main run, not beside it: the e2e packages of two series
	# would want the same ports. e2e/vm runs its series-sensitive
	# scenarios only (docs/testing.md).
	for series in $IRONIC_SERIES_EXTRA; do
		IRONIC_SERIES=$series go_test_round "go test -race ./e2e/ ./e2e/vm/ against Ironic $series" "go-test-ironic-$series" \
			-race -count=1 -timeout 40m "$@" ./e2e/ ./e2e/vm/ || test_status=$?
	done
fi

log "host guard: snapshot after the tests"
guard_status=0
"$guard_dir/hostguard" snapshot -o "$guard_dir/after.json" &&
	"$guard_dir/hostguard" diff "$guard_dir/before.json" "$guard_dir/after.json" || guard_status=$?
if [ "$guard_status" != 0 ]; then
	log "host guard: the run changed this machine (snapshots kept in $guard_dir)"
else
	rm -rf "$guard_dir"
fi
log "metrics of this run: $METRICS_DIR ($(cat "$METRICS_DIR"/*.metrics 2>/dev/null | wc -l) figures; scripts/perf-page.sh makes docs/performance.md of them)"
if [ "$test_status" != 0 ]; then
	log "go test failed (exit status $test_status)"
fi
if [ "$test_status" != 0 ] || [ "$guard_status" != 0 ]; then
	exit 1
fi
log "all tests passed and the host is as it was"
