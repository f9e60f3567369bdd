package ramdisk

import (
	"fmt"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
)

// KernelFlavour is a Debian release whose kernel the ramdisk carries: the
// linux-image-<arch> of its suites, and the firmware of the same suites,
// so a driver finds the firmware files its own release ships.
type KernelFlavour struct {
	Name string // what mkramdisk -kernel, make ramdisk KERNEL= and RAMDISK_KERNEL take
	// Suites are the archive suites the kernel and firmware come from;
	// one ending in -security is taken from the security mirror.
	// With several, the highest version of a package wins.
	Suites []string
	About  string // for the operator: which kernel, and when to pick it
	// Budget is the most its kernel and initramfs may weigh together
	// (bytes; see CheckBudget).
	Budget int64
	// Mirrors are where the suites are fetched from; an empty field is
	// resolved by ResolveMirrors (the host's Debian mirrors, else
	// Debian's own).
	Mirrors debian.Mirrors `json:"-"`
	// Arch is the Debian architecture the kernel, firmware and programs
	// are taken for (Arches; "": DefaultArch).
	Arch string `json:"-"`
}

// DefaultKernelFlavour is the newest Debian stable release's kernel.
const DefaultKernelFlavour = "trixie"

// KernelFlavours returns the kernels a ramdisk can be built with.
func KernelFlavours() []KernelFlavour {
	return []KernelFlavour{
		{Name: "bookworm", Suites: []string{"bookworm", "bookworm-updates", "bookworm-security"},
			About: "Debian 12's kernel (6.1 LTS): for a fleet validated on it", Budget: SizeBudget},
		{Name: "trixie", Suites: []string{"trixie", "trixie-updates", "trixie-security"},
			About: "Debian 13's kernel (6.12 LTS), the newest Debian stable: the default", Budget: SizeBudget},
		{Name: "newest", Suites: []string{"trixie-backports", "forky"},
			About: "the higher-versioned kernel of trixie-backports and forky (testing): for hardware the stable kernels do not drive yet; no security support from Debian's security team",
			// Its kernel weighs more than the LTS ones, and each module
			// carries several times their BTF type data (7.3: a bzImage
			// 2.2 MiB larger, e1000e's .BTF 121 KB against 35 KB), which
			// cannot be stripped without breaking the module's signature.
			// It also changes with every upload: the ceiling leaves room.
			Budget: NewestSizeBudget},
	}
}

// LookupKernelFlavour returns the flavour called name ("" for the default).
func LookupKernelFlavour(name string) (KernelFlavour, error) {
	if name == "" {
		name = DefaultKernelFlavour
	}
	var names []string
	for _, f := range KernelFlavours() {
		if f.Name == name {
			return f, nil
		}
		names = append(names, f.Name)
	}
	return KernelFlavour{}, fmt.Errorf("ramdisk: unknown kernel flavour %q (want one of %s)", name, strings.Join(names, ", "))
}
