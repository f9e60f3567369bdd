package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ironic-go/ironic-agent/internal/ramdisk"
)

// Ramdisk is a built kernel + initramfs.
type Ramdisk struct {
	Kernel, Initrd, Agent string
	KernelVersion         string
	KernelPackage         string
}

// RepoRoot finds the module root (the directory holding go.mod) above the
// working directory, where tests run.
func RepoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("vmtest: no go.mod above the working directory")
		}
		d = p
	}
}

// BuildRamdisk builds the agent (static) from the repository and the
// ramdisk into dir, with the kernel from the download cache.
func BuildRamdisk(ctx context.Context, dir string) (*Ramdisk, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cache, err := ramdisk.CacheDir()
	if err != nil {
		return nil, err
	}
	k, err := ramdisk.FetchKernel(ctx, cache, os.Getenv("IRONIC_AGENT_KERNEL_PACKAGE"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("vmtest: %w", err)
	}
	agent := filepath.Join(dir, "ironic-agent")
	if err := ramdisk.BuildAgent(ctx, root, agent); err != nil {
		return nil, err
	}
	res, err := ramdisk.Build(ctx, ramdisk.Options{Kernel: k, Agent: agent}, dir)
	if err != nil {
		return nil, err
	}
	return &Ramdisk{Kernel: res.Kernel, Initrd: res.Initramfs, Agent: agent, KernelVersion: k.Version, KernelPackage: k.Package}, nil
}
