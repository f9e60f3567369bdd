package ramdisk

import (
	"context"

	"github.com/ironic-go/ironic-agent/internal/programs"
)

// Inputs says what FetchInputs fetches.
type Inputs struct {
	Flavour KernelFlavour
	// KernelPackage is a Debian kernel package of the flavour's suites
	// ("": the one their linux-image-<arch> depends on; the architecture
	// is the flavour's Arch).
	KernelPackage string
	// Firmware fetches the firmware packages (FirmwarePackages) and the
	// index of the firmware Debian ships; Programs the registered
	// programs with their libraries.
	Firmware, Programs bool
}

// FetchInputs fetches, into cacheDir, the Debian packages a ramdisk is
// built from and returns the Options that carry them (Agent and the
// module choices are the caller's).
func FetchInputs(ctx context.Context, cacheDir string, in Inputs) (Options, error) {
	var opts Options
	var err error
	if opts.Kernel, err = FetchKernel(ctx, cacheDir, in.Flavour, in.KernelPackage); err != nil {
		return opts, err
	}
	if in.Firmware {
		if opts.Firmware, err = FetchFirmware(ctx, cacheDir, in.Flavour, FirmwarePackages()); err != nil {
			return opts, err
		}
		if opts.FirmwareIndex, opts.FirmwareIndexUnverified, err = FirmwareIndex(ctx, cacheDir, in.Flavour, opts.Firmware); err != nil {
			return opts, err
		}
	}
	if in.Programs {
		if opts.Programs, err = FetchPrograms(ctx, cacheDir, in.Flavour.Arch, in.Flavour.Mirrors, programs.All()); err != nil {
			return opts, err
		}
	}
	return opts, nil
}
