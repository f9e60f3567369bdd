package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// logPiece is one file of the log tarball.
type logPiece struct {
	name string
	data func(ctx context.Context) ([]byte, error)
}

// systemLogs builds what log.collect_system_logs returns and the "logs"
// inspection collector sends: base64 of a tar.gz. IPA runs journalctl,
// dmesg, ip addr, lsblk, efibootmgr, multipath, ...; the agent reads the
// same facts from the kernel and its own collectors, under IPA's entry
// names where IPA has the view, and adds the init's log (modules,
// network, network_data) and its own, which explain a failed boot or
// step. docs/operator-guide.md lists the entries. A piece that cannot
// be read becomes "<name>.error" with the reason.
func (a *Agent) systemLogs(ctx context.Context) (string, error) {
	pieces := []logPiece{
		{"init.log", func(context.Context) ([]byte, error) { return a.initLog() }},
		{"agent.log", func(context.Context) ([]byte, error) { return a.ring.Bytes(), nil }},
		{"dmesg", func(context.Context) ([]byte, error) { return readKernelLog() }},
		{"cmdline", func(context.Context) ([]byte, error) { return os.ReadFile("/proc/cmdline") }},
		{"partitions", func(context.Context) ([]byte, error) { return os.ReadFile("/proc/partitions") }},
		{"mdstat", func(context.Context) ([]byte, error) { return os.ReadFile("/proc/mdstat") }},
		{"multipath", func(context.Context) ([]byte, error) { return a.multipathMaps() }},
		{"efibootmgr", func(context.Context) ([]byte, error) { return a.bootEntries() }},
		{"mount", func(context.Context) ([]byte, error) { return os.ReadFile("/proc/mounts") }},
		{"df", func(context.Context) ([]byte, error) { return diskFree("/proc/mounts") }},
		{"ip_addr", func(context.Context) ([]byte, error) { return ipAddr() }},
		{"ip_route", func(context.Context) ([]byte, error) { return routes() }},
		{"ps", func(context.Context) ([]byte, error) { return processList("/proc") }},
		{"hardware-info.json", func(ctx context.Context) ([]byte, error) {
			inv, err := a.Inventory(ctx)
			if err != nil {
				return nil, err
			}
			b, err := json.MarshalIndent(inv, "", "  ")
			return append(b, '\n'), err
		}},
	}
	// lsblk, then udev/<device> for each block device.
	pieces = append(pieces, a.blockPieces(ctx)...)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	now := time.Now()
	for _, p := range pieces {
		name := p.name
		data, err := p.data(ctx)
		if err != nil {
			name += ".error"
			data = []byte(err.Error() + "\n")
		}
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", fmt.Errorf("log tarball: %w", err)
		}
		if _, err := tw.Write(data); err != nil {
			return "", fmt.Errorf("log tarball: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("log tarball: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("log tarball: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// readKernelLog reads the kernel ring buffer with syslog(2)
// (SYSLOG_ACTION_SIZE_BUFFER, then SYSLOG_ACTION_READ_ALL), what dmesg does.
func readKernelLog() ([]byte, error) {
	size, err := syscall.Klogctl(10, nil)
	if err != nil {
		return nil, fmt.Errorf("syslog(2) SIZE_BUFFER: %w", err)
	}
	if size <= 0 {
		size = 1 << 20
	}
	buf := make([]byte, size)
	n, err := syscall.Klogctl(3, buf)
	if err != nil {
		return nil, fmt.Errorf("syslog(2) READ_ALL: %w", err)
	}
	return buf[:n], nil
}

// ipAddr lists interfaces and addresses, like "ip addr".
func ipAddr() ([]byte, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, ifi := range ifs {
		fmt.Fprintf(&b, "%d: %s: <%s> mtu %d\n    link/ether %s\n", ifi.Index, ifi.Name, ifi.Flags, ifi.MTU, ifi.HardwareAddr)
		addrs, err := ifi.Addrs()
		if err != nil {
			fmt.Fprintf(&b, "    (addresses: %v)\n", err)
			continue
		}
		for _, ad := range addrs {
			fam := "inet"
			if n, ok := ad.(*net.IPNet); ok && n.IP.To4() == nil {
				fam = "inet6"
			}
			fmt.Fprintf(&b, "    %s %s\n", fam, ad)
		}
	}
	return b.Bytes(), nil
}

// processList lists processes with their command lines, like "ps au".
func processList(proc string) ([]byte, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, n)
		}
	}
	sort.Ints(pids)
	var b bytes.Buffer
	b.WriteString("PID CMD\n")
	for _, pid := range pids {
		cl, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))
		if cmd == "" {
			comm, _ := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "comm"))
			cmd = "[" + strings.TrimSpace(string(comm)) + "]"
		}
		fmt.Fprintf(&b, "%d %s\n", pid, cmd)
	}
	return b.Bytes(), nil
}

// diskFree reports size and use of every mounted filesystem, like "df -a".
func diskFree(mounts string) ([]byte, error) {
	data, err := os.ReadFile(mounts)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("Filesystem 1K-blocks Used Available Mounted-on\n")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(f[1], &st); err != nil {
			fmt.Fprintf(&b, "%s - - - %s (%v)\n", f[0], f[1], err)
			continue
		}
		bs := uint64(st.Bsize)
		fmt.Fprintf(&b, "%s %d %d %d %s\n", f[0], st.Blocks*bs/1024, (st.Blocks-st.Bfree)*bs/1024, st.Bavail*bs/1024, f[1])
	}
	return b.Bytes(), nil
}
