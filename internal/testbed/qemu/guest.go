package qemu

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// AddLinked adds each of bins, and every shared library ldd names for it,
// to files (archive path -> host path), the extra files of a guest ramdisk
// (BuildGuestRamdisk). The ramdisk gives them mode 0644: the guest must
// make them executable.
func AddLinked(ctx context.Context, files map[string]string, bins ...string) error {
	for _, bin := range bins {
		files[strings.TrimPrefix(bin, "/")] = bin
		cmd := exec.CommandContext(ctx, "ldd", bin)
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("qemu: ldd %s: %w", bin, err)
		}
		for _, w := range strings.Fields(string(out)) {
			if !strings.HasPrefix(w, "/") {
				continue
			}
			real, err := filepath.EvalSymlinks(w)
			if err != nil {
				return fmt.Errorf("qemu: library of %s: %w", bin, err)
			}
			files[strings.TrimPrefix(w, "/")] = real
		}
	}
	return nil
}

// uploadHost is the guest-side address of RunUpload's guestfwd.
const uploadHost = "10.0.2.100:80"

// RunUpload boots m with the ramdisk command cmd,dir (ironic_agent.cmd:
// the command's arguments, comma-separated, the last one the guest
// directory it writes) and DHCP on the first NIC only. When the command
// ends the init POSTs dir as a tar.gz through a guestfwd to a server of
// this process. RunUpload returns once the VM has powered off, with the
// upload.
func RunUpload(ctx context.Context, m Machine, cmd, dir string, opts Options) (*VM, []byte, error) {
	uploaded := make(chan []byte, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/upload" {
			http.Error(w, "POST /upload only", http.StatusNotFound)
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, 256<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case uploaded <- b:
		default:
		}
		fmt.Fprintln(w, "ok")
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	if m.GuestFwd == nil {
		m.GuestFwd = map[string]string{}
	}
	m.GuestFwd[uploadHost] = ln.Addr().String()
	// DHCP on the first NIC only: a lease on the second one could arrive
	// before or after the command, and what it records would differ run to
	// run.
	m.Append = "ironic_agent.cmd=" + cmd + "," + dir + " ironic_agent.upload=http://" + strings.TrimSuffix(uploadHost, ":80") +
		"/upload ironic_agent.upload_dir=" + dir + " ironic_agent.dhcp=" + m.NICs[0].MAC
	vm, err := Start(ctx, m, opts)
	if err != nil {
		return nil, nil, err
	}
	if err := vm.Wait(ctx); err != nil {
		return vm, nil, err
	}
	select {
	case b := <-uploaded:
		return vm, b, nil
	default:
		return vm, nil, fmt.Errorf("qemu: the VM powered off without uploading %s (serial console in %s)", dir, vm.LogPath)
	}
}
