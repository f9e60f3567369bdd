package netbed

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// ProvNet is a provisioning network: a network namespace holding a bridge
// with the host's address on it (where Ironic, its HTTP root and the BMCs
// listen), one tap per machine as a bridge port, and dnsmasq answering
// DHCP and TFTP for network boots the way an Ironic deployment configures
// it for iPXE (see StartDHCP). Nothing of it is visible from the host's
// namespace; the test reaches it with Dial and Do.
type ProvNet struct {
	Name   string       // the namespace, under /run/netns
	Bridge string       // the bridge's name in it
	Host   netip.Prefix // the bridge's address and the network
	dir    string

	mu      sync.Mutex
	taps    []*os.File
	dnsmasq *exec.Cmd
	dnsDone chan error
	servers []*http.Server
}

// NewProvNet creates namespace name with lo up and bridge "br0" holding
// host (10.99.0.1/24, say); dir receives dnsmasq's files and log. Needs
// root. Close removes it all.
func NewProvNet(ctx context.Context, name string, host netip.Prefix, dir string) (*ProvNet, error) {
	if !host.Addr().Is4() {
		return nil, fmt.Errorf("netbed: provisioning network %s: want an IPv4 prefix", host)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("netbed: %w", err)
	}
	if err := ip(ctx, "netns", "add", name); err != nil {
		return nil, err
	}
	p := &ProvNet{Name: name, Bridge: "br0", Host: host, dir: dir}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", p.Bridge, "type", "bridge"},
		// No STP and no forwarding delay: a port forwards the moment a
		// VM's NIC comes up, as the firmware's DHCP needs.
		{"link", "set", p.Bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0"},
		{"addr", "add", host.String(), "dev", p.Bridge},
		// A unique local prefix for router advertisements (StartDHCP).
		{"-6", "addr", "add", "fd00:99::1/64", "dev", p.Bridge, "nodad"},
		{"link", "set", p.Bridge, "up"},
	} {
		if err := ip(ctx, append([]string{"-n", name}, args...)...); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

// AddAddress puts another address of the network on the bridge (a BMC's
// LAN address, say).
func (p *ProvNet) AddAddress(ctx context.Context, a netip.Addr) error {
	return ip(ctx, "-n", p.Name, "addr", "add", netip.PrefixFrom(a, p.Host.Bits()).String(), "dev", p.Bridge)
}

// AddTap creates tap device name as a port of the bridge and returns its
// file, for Options.Tap. The port lives until the file is closed (by the
// caller, or by Close).
func (p *ProvNet) AddTap(ctx context.Context, name string) (*os.File, error) {
	f, err := openTap(p.Name, name)
	if err != nil {
		return nil, err
	}
	if err := ip(ctx, "-n", p.Name, "link", "set", name, "master", p.Bridge, "up"); err != nil {
		f.Close()
		return nil, err
	}
	p.mu.Lock()
	p.taps = append(p.taps, f)
	p.mu.Unlock()
	return f, nil
}

// DHCP is what dnsmasq serves: addresses from a range, and the boot file
// by what the client runs.
type DHCP struct {
	// First and Last bound the addresses handed out.
	First, Last netip.Addr
	// TFTPRoot holds BIOSLoader and UEFILoader (Ironic's HTTP root, where
	// [pxe]loader_file_paths puts them).
	TFTPRoot string
	// BIOSLoader is the boot file of a PXE client that is not iPXE on
	// BIOS (undionly.kpxe); UEFILoader that of a UEFI one (x86-64 EFI
	// client architectures 7 and 9: snponly.efi, Ironic's default).
	BIOSLoader, UEFILoader string
	// IPXEScript is the URL iPXE clients (user class "iPXE", or option
	// 175) get: Ironic's boot.ipxe.
	IPXEScript string
	// PXE are the MACs of machines booted by Ironic's pxe boot interface:
	// whatever they run, a BIOS client gets pxelinux.0 and a UEFI one
	// GRUBLoader (from TFTPRoot).
	PXE []string
	// GRUBLoader is the boot file of a UEFI machine of PXE: Ironic's
	// [pxe]uefi_pxe_bootfile_name (bootx64.efi), a network GRUB that reads
	// the grub/grub.cfg Ironic puts in its TFTP root. Empty: none is
	// offered.
	GRUBLoader string
	// GRUBLoaderArm64 is GRUBLoader for an arm64 UEFI machine of PXE
	// (client architecture 11): Ironic's [pxe]pxe_bootfile_name_by_arch
	// for aarch64 (grubaa64.efi). Empty: none is offered.
	GRUBLoaderArm64 string
	// HTTPBoot are the MACs of machines booted by Ironic's http boot
	// interface (UEFI HTTP boot): their firmware's HTTP client (vendor
	// class HTTPClient) gets the boot file's URL, as Ironic's DHCP
	// options for that interface say, and any other request of theirs an
	// address but no boot file (a PXE client of theirs gets nothing to
	// boot, not another machine's loader).
	HTTPBoot []string
	// HTTPLoaderArm64 is the URL an arm64 UEFI HTTP client (client
	// architecture 19) of HTTPBoot gets: Ironic's [deploy]http_url and
	// [pxe]pxe_bootfile_name_by_arch for aarch64. Empty: none is offered.
	HTTPLoaderArm64 string
	// Ignore are the MACs of machines dnsmasq does not answer: for them
	// the network has no DHCP server.
	Ignore []string
}

// dnsmasqArgs is dnsmasq's command line for d on the bridge: the iPXE
// chainloading of Ironic's install guide ("PXE setup", iPXE with
// dnsmasq), no DNS.
func (p *ProvNet) dnsmasqArgs(d DHCP) []string {
	a := []string{"--no-daemon", "--conf-file=/dev/null", "--port=0",
		"--bind-interfaces", "--interface=" + p.Bridge, "--except-interface=lo",
		// Root keeps reading TFTPRoot, which lies below a test's 0700
		// temporary directory; the namespace is the test's own.
		"--user=root",
		"--dhcp-leasefile=" + filepath.Join(p.dir, "dnsmasq.leases"), "--pid-file=" + filepath.Join(p.dir, "dnsmasq.pid"),
		"--log-dhcp", "--log-facility=" + filepath.Join(p.dir, "dnsmasq.log"),
		// No ping before an offer: the network is the test's, and the
		// 3 s wait would be paid by every boot's firmware and ramdisk.
		"--no-ping",
		fmt.Sprintf("--dhcp-range=%s,%s,%s,10m", d.First, d.Last, net.IP(net.CIDRMask(p.Host.Bits(), 32))),
		"--enable-tftp", "--tftp-root=" + d.TFTPRoot,
		"--dhcp-match=set:ipxe,175",
		"--dhcp-userclass=set:ipxe,iPXE",
		"--dhcp-match=set:efi,option:client-arch,7",
		"--dhcp-match=set:efi,option:client-arch,9",
		"--dhcp-boot=tag:ipxe,tag:!pxe," + d.IPXEScript,
		// iPXE's no-pxedhcp (175.176): no wait for ProxyDHCP offers
		// there is no server for.
		"--dhcp-option=tag:ipxe,encap:175,176,1",
		// Router advertisements without M or O flags: iPXE configures
		// IPv6 beside DHCPv4 and, with no router to answer, waits 16 s
		// for one on every boot.
		"--enable-ra", "--dhcp-range=::,constructor:" + p.Bridge + ",ra-only",
		"--dhcp-boot=tag:efi,tag:!ipxe,tag:!pxe,tag:!httpboot," + d.UEFILoader,
		"--dhcp-boot=tag:!efi,tag:!ipxe,tag:!pxe,tag:!httpboot," + d.BIOSLoader,
		"--dhcp-match=set:efiaa64,option:client-arch,11",
		"--dhcp-boot=tag:pxe,tag:!efi,tag:!efiaa64,pxelinux.0",
	}
	if d.GRUBLoader != "" {
		a = append(a, "--dhcp-boot=tag:pxe,tag:efi,"+d.GRUBLoader)
	}
	if d.GRUBLoaderArm64 != "" {
		a = append(a, "--dhcp-boot=tag:pxe,tag:efiaa64,"+d.GRUBLoaderArm64)
	}
	if d.HTTPLoaderArm64 != "" {
		// What Ironic's DHCP options for the http interface say (its
		// pxe_utils.dhcp_options_for_instance): the boot file as a URL,
		// and option 60 (vendor class) HTTPClient, without which the
		// firmware takes the offer for an address only. The firmware's
		// class is HTTPClient:Arch:00019:UNDI:003001 (dnsmasq matches a
		// substring); it asks for no option 60, hence force.
		a = append(a, "--dhcp-vendorclass=set:httpclient,HTTPClient",
			"--dhcp-match=set:httpaa64,option:client-arch,19",
			"--dhcp-boot=tag:httpboot,tag:httpclient,tag:httpaa64,"+d.HTTPLoaderArm64,
			"--dhcp-option-force=tag:httpboot,tag:httpclient,60,HTTPClient")
	}
	for _, mac := range d.PXE {
		a = append(a, "--dhcp-host="+mac+",set:pxe")
	}
	for _, mac := range d.HTTPBoot {
		a = append(a, "--dhcp-host="+mac+",set:httpboot")
	}
	for _, mac := range d.Ignore {
		a = append(a, "--dhcp-host="+mac+",ignore")
	}
	return a
}

// StartDHCP runs dnsmasq on the bridge with d until Close.
func (p *ProvNet) StartDHCP(d DHCP) error {
	if !p.Host.Contains(d.First) || !p.Host.Contains(d.Last) {
		return fmt.Errorf("netbed: DHCP range %s-%s is not in %s", d.First, d.Last, p.Host)
	}
	cmd := qemu.InNetns(p.Name, "dnsmasq", p.dnsmasqArgs(d)...)
	out, err := os.Create(filepath.Join(p.dir, "dnsmasq.out"))
	if err != nil {
		return fmt.Errorf("netbed: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	waited, err := qemu.StartLocked(cmd)
	if err != nil {
		out.Close()
		return fmt.Errorf("netbed: start dnsmasq (Debian package dnsmasq-base): %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- <-waited; out.Close() }()
	p.mu.Lock()
	p.dnsmasq, p.dnsDone = cmd, done
	p.mu.Unlock()
	return nil
}

// DHCPLog is dnsmasq's log so far.
func (p *ProvNet) DHCPLog() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "dnsmasq.log"))
	return string(b)
}

// Do runs fn on an OS thread inside the namespace: sockets it opens are
// the namespace's.
func (p *ProvNet) Do(fn func() error) error { return netnstest.Do(p.Name, fn) }

// Dial connects from inside the namespace.
func (p *ProvNet) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return Dialer(p.Name)(ctx, network, addr)
}

// Serve serves h over HTTP on addr inside the namespace until Close.
func (p *ProvNet) Serve(addr string, h http.Handler) error {
	var l net.Listener
	if err := p.Do(func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		return fmt.Errorf("netbed: HTTP server on %s in %s: %w", addr, p.Name, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(l) }()
	p.mu.Lock()
	p.servers = append(p.servers, srv)
	p.mu.Unlock()
	return nil
}

// Close stops dnsmasq and the HTTP servers, closes the taps and deletes
// the namespace.
func (p *ProvNet) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.servers {
		_ = s.Close()
	}
	p.servers = nil
	if p.dnsmasq != nil {
		_ = syscall.Kill(-p.dnsmasq.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.dnsDone:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.dnsmasq.Process.Pid, syscall.SIGKILL)
			<-p.dnsDone
		}
		p.dnsmasq = nil
	}
	for _, f := range p.taps {
		f.Close()
	}
	p.taps = nil
	if err := ip(context.Background(), "netns", "del", p.Name); err != nil {
		// Close has no caller to tell; a namespace left behind must
		// not go unnoticed.
		fmt.Fprintf(os.Stderr, "netbed: provisioning network: %v\n", err)
	}
}
