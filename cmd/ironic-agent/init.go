package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
)

// isRamdiskInit reports whether the binary was started by the kernel as
// /init of the agent ramdisk (where /init is a link to the binary). The
// kernel passes unknown bare words of its command line as arguments, so
// the arguments say nothing.
func isRamdiskInit() bool {
	return os.Getpid() == 1 && filepath.Base(os.Args[0]) == "init"
}

func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("init", "",
		"PID 1 of the agent ramdisk (the kernel starts it as /init): mount /proc, /sys, /dev, /run,\n"+
			"load the kernel modules the machine's devices call for, bring the NICs up with DHCP, then start and\n"+
			"supervise 'ironic-agent run' with the kernel parameters. Kernel parameters of the init:\n"+
			"  "+rdinit.ParamCommand+"=CMD[,ARG...]   subcommand to run instead of run (e.g. inventory)\n"+
			"  "+rdinit.ParamExit+"=restart|poweroff|reboot|hold   when it exits (run: restart, else poweroff)\n"+
			"  "+rdinit.ParamUpload+"=URL "+rdinit.ParamUploadDir+"=DIR   POST DIR as tar.gz after the command\n"+
			"  "+rdinit.ParamDHCP+"=all|none|MAC[,MAC]   NICs to configure by DHCP (default all)\n"+
			"  "+rdinit.ParamDHCPTimeout+"=SECONDS   wait for the first lease (default 60)\n"+
			"  "+rdinit.ParamModules+"=NAME[,NAME]|all   load more of the initramfs's modules (all: every\n"+
			"      one, not only those the machine's devices call for)\n"+
			"  "+rdinit.ParamModuleJobs+"=N   modules loaded at once (default 1)\n"+
			"  "+rdinit.ParamNetworkData+"=0   do not configure the network from a config drive (label config-2)'s\n"+
			"      openstack/latest/network_data.json (static addresses, bonds, VLANs) instead of DHCP\n"+
			"IPA's parameters the init acts on (the agent reads them too):\n"+
			"  "+rdinit.ParamVLANs+"=IFACE.VLAN|MAC.VLAN|IFACE|all[,...]   create VLAN links (loading 8021q)\n"+
			"      and run DHCP on them; IFACE and all: the VLANs the NIC's LLDP neighbour announces, only with\n"+
			"      "+rdinit.ParamCollectLLDP+"=1, listening up to "+rdinit.ParamLLDPTimeout+" seconds (default 30)", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if os.Getpid() != 1 {
		return fmt.Errorf("must run as PID 1 (the ramdisk's /init)")
	}
	return initUntilFailure(ctx, stdout, stderr, rdinit.Main, func() error { return rdinit.Halt(false) })
}

// initUntilFailure runs the init (rdinit.Main) and, when it returns or
// panics, in this goroutine or one it started, reports why on the console
// and powers off: PID 1 must not exit, the kernel would panic and the
// console would show that instead of the cause. powerOff is a parameter so
// tests can inject a panic without powering the host off.
func initUntilFailure(ctx context.Context, stdout, stderr io.Writer,
	main func(ctx context.Context, console io.Writer, onPanic func(error)) error, powerOff func() error) (err error) {
	var once sync.Once
	fail := func(cause error) {
		once.Do(func() {
			var p *rdinit.PanicError
			if errors.As(cause, &p) {
				fmt.Fprintf(stderr, "ironic-agent init: %v\n%s", p, p.Stack)
			}
			fmt.Fprintf(stderr, "ironic-agent init: %v; powering off\n", cause)
			err = powerOff()
			if err != nil {
				fmt.Fprintf(stderr, "ironic-agent init: power off: %v\n", err)
			}
		})
	}
	defer rdinit.Recover(fail)
	fail(main(ctx, stdout, fail))
	return err
}
