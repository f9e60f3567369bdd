package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

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
	return BuildGuestRamdisk(ctx, dir, "", nil)
}

// BuildGuestRamdisk is BuildRamdisk with another program as /init: pkg is
// the Go package to build statically instead of ./cmd/ironic-agent (""
// for the agent), and files are extra files (archive path -> host path).
func BuildGuestRamdisk(ctx context.Context, dir, pkg string, files map[string]string) (*Ramdisk, error) {
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
	if pkg == "" {
		err = ramdisk.BuildAgent(ctx, root, agent)
	} else {
		agent = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", agent, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, berr := cmd.CombinedOutput(); berr != nil {
			err = fmt.Errorf("vmtest: %s in %s: %w: %s", strings.Join(cmd.Args, " "), root, berr, strings.TrimSpace(string(out)))
		}
	}
	if err != nil {
		return nil, err
	}
	res, err := ramdisk.Build(ctx, ramdisk.Options{Kernel: k, Agent: agent, Files: files}, dir)
	if err != nil {
		return nil, err
	}
	return &Ramdisk{Kernel: res.Kernel, Initrd: res.Initramfs, Agent: agent, KernelVersion: k.Version, KernelPackage: k.Package}, nil
}
