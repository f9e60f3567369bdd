# Ramdisk targets. Everything else is plain go commands (see README.md).
.PHONY: agent ramdisk ramdisk-check iso release

# build/ironic-agent: a static agent stamped with the tree's git describe and
# commit, as the ramdisk build (internal/ramdisk.BuildAgent) stamps it.
VERSION_PKG := github.com/ironic-go/ironic-agent/internal/version
agent:
	CGO_ENABLED=0 GOFIPS140=certified go build -trimpath -o build/ironic-agent \
		-ldflags "-s -w -X $(VERSION_PKG).describe=$$(git describe --tags --always --dirty) -X $(VERSION_PKG).commit=$$(git rev-parse HEAD)" \
		./cmd/ironic-agent

# build/ramdisk/ironic-agent.kernel + ironic-agent.initramfs: Debian's kernel
# (fetched from a Debian mirror and verified, cached in
# $XDG_CACHE_HOME/ironic-agent) and an initramfs whose /init is a static
# ironic-agent. No root, apt or dpkg needed.
# KERNEL picks the kernel flavour: bookworm, trixie (the default), newest.
# ARCH picks the architecture: amd64 (the default) or arm64, built on any
# host (the agent cross-built, Debian's arm64 kernel, firmware and
# programs) into build/ramdisk-arm64; another name is refused.
# MIRROR and SECURITY_MIRROR pick the Debian archive and security archive
# (default: the host's Debian mirrors, else Debian's own).
KERNEL ?= trixie
MIRROR ?=
SECURITY_MIRROR ?=
ARCH ?= amd64
MIRROR_FLAGS = -mirror "$(MIRROR)" -security-mirror "$(SECURITY_MIRROR)"
RAMDISK_OUT = build/ramdisk$(if $(filter-out amd64,$(ARCH)),-$(ARCH))
ramdisk:
	go run ./cmd/mkramdisk -arch "$(ARCH)" -out "$(RAMDISK_OUT)" -kernel "$(KERNEL)" $(MIRROR_FLAGS)

# Boot the ramdisk in QEMU: every module of the manifest loads, and the
# kernel loads every firmware file in it (e2e/ramdisk/modules).
# amd64 only: the arm64 ramdisk boots in e2e/ramdisk's TestArm64* (E2E_VM_SLOW=1).
ramdisk-check:
	@if [ "$(ARCH)" != amd64 ]; then echo "ramdisk-check boots amd64 ramdisks; for $(ARCH): E2E_VM_SLOW=1 go test -run TestArm64 ./e2e/ramdisk/" >&2; exit 1; fi
	RAMDISK_KERNEL="$(KERNEL)" go test -count=1 ./e2e/ramdisk/modules/

# The same plus build/ramdisk/ironic-agent.esp (Debian's signed shim and GRUB,
# for Ironic's [conductor]bootloader) and build/ramdisk/ironic-agent.iso for
# virtual media, booting UEFI (Secure Boot too) through that ESP and BIOS
# through grub-mkrescue's GRUB (needs grub-pc-bin, xorriso, mtools).
# Kernel parameters for the boot entry: make iso CMDLINE="ipa-api-url=..."
iso:
	go run ./cmd/mkramdisk -arch "$(ARCH)" -out "$(RAMDISK_OUT)" -kernel "$(KERNEL)" $(MIRROR_FLAGS) -iso -cmdline "$(CMDLINE)"

# The release directory (docs/releases.md): the versioned kernel, initramfs
# and ISO with their .sha256, the SPDX bill of materials, IPA's layout
# under dib/, then the Metal3 downloader image when cmd/mkdownloader
# exists, and SHA256SUMS last, over everything. Reproducible: the same
# commit, Go toolchain and Debian package versions give the same bytes.
# ARCH is one architecture or a comma-separated list (ARCH=amd64,arm64),
# each one's files in the same directory under its own names.
RELEASE_DIR ?= build/release
VERSION := $(shell cat VERSION)
release:
	go run ./cmd/mkrelease -out "$(RELEASE_DIR)" -arch "$(ARCH)" -kernel "$(KERNEL)" -sums=false
	if [ -d cmd/mkdownloader ]; then \
		go run ./cmd/mkdownloader -release "$(RELEASE_DIR)" -out "$(RELEASE_DIR)/ironic-agent-$(VERSION)-downloader.oci.tar"; \
	fi
	go run ./cmd/mkrelease -sums-only "$(RELEASE_DIR)"
