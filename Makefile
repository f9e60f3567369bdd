# Ramdisk targets. Everything else is plain go commands (see README.md).
.PHONY: ramdisk iso

# build/ramdisk/ironic-agent.kernel + ironic-agent.initramfs: Debian's kernel
# (apt-get download, cached in $XDG_CACHE_HOME/ironic-agent) and an initramfs
# whose /init is a static ironic-agent. No root needed.
ramdisk:
	go run ./cmd/mkramdisk -out build/ramdisk

# The same plus build/ramdisk/ironic-agent.iso for virtual media (needs
# grub-mkrescue: grub-pc-bin, grub-efi-amd64-bin, xorriso, mtools).
# Kernel parameters for the boot entry: make iso CMDLINE="ipa-api-url=..."
iso:
	go run ./cmd/mkramdisk -out build/ramdisk -iso -cmdline "$(CMDLINE)"
