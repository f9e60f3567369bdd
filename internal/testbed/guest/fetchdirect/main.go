// Command fetchdirect is an executable deploy step (fetch_direct) that
// does in the agent's VM what `curl URL | dd of=DISK bs=1M oflag=direct
// iflag=fullblock` does: it streams the image from the image server
// straight onto the disk the node's root-device hint names by serial, in
// 1 MiB O_DIRECT writes, without checksums or sync. The ramdisk carries
// neither curl nor dd, so e2e/vm's TestVMDeployThroughputBIOS puts this
// step into it and runs it before write_image, in the same VM, from the
// same server, to the same disk: the limit the agent's own write is set
// beside.
//
// It reads the agent's step input ({"step", "node", "ports", "args"},
// args {"url", "proxy"}) on stdin, prints {"device", "bytes", "seconds"}
// as the step's result, and the same as one line on the console,
//
//	fetchdirect: wrote BYTES bytes to DEVICE in SECONDS s
//
// which the test reads.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/testbed/guest/diskserial"
)

// blockSize is dd's bs=1M.
const blockSize = 1 << 20

// input is the part of the agent's step input this step uses.
type input struct {
	Node diskserial.RootHint `json:"node"`
	Args struct {
		URL   string `json:"url"`
		Proxy string `json:"proxy"`
	} `json:"args"`
}

// result is what the step reports.
type result struct {
	Device  string  `json:"device"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

func main() {
	res, err := run(os.Stdin, "/sys/block", "/dev", os.O_WRONLY|unix.O_DIRECT)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fetchdirect:", err)
		os.Exit(1)
	}
	line := consoleLine(res)
	if c, err := os.OpenFile("/dev/console", os.O_WRONLY, 0); err == nil {
		_, _ = io.WriteString(c, line)
		c.Close()
	}
	fmt.Fprint(os.Stderr, line)
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

// consoleLine is the line the test finds on the console.
func consoleLine(r result) string {
	return fmt.Sprintf("fetchdirect: wrote %d bytes to %s in %.3f s\n", r.Bytes, r.Device, r.Seconds)
}

// run fetches args.url (through args.proxy when set) onto the disk, the
// device opened with flags (O_DIRECT in the guest; tests of regular
// files leave it out).
func run(stdin io.Reader, sysBlock, dev string, flags int) (result, error) {
	var in input
	if err := json.NewDecoder(stdin).Decode(&in); err != nil {
		return result{}, fmt.Errorf("read the step input on stdin: %w", err)
	}
	serial := in.Node.Serial()
	if serial == "" || in.Args.URL == "" {
		return result{}, errors.New("want the node's properties.root_device.serial and the url argument")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if in.Args.Proxy != "" {
		p, err := url.Parse(in.Args.Proxy)
		if err != nil {
			return result{}, fmt.Errorf("proxy argument %q: %w", in.Args.Proxy, err)
		}
		tr.Proxy = http.ProxyURL(p)
	}
	name, err := diskserial.Find(sysBlock, serial)
	if err != nil {
		return result{}, err
	}
	path := filepath.Join(dev, name)
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return result{}, fmt.Errorf("open the disk: %w", err)
	}
	defer f.Close()
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Get(in.Args.URL)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return result{}, fmt.Errorf("GET %s: %s", in.Args.URL, resp.Status)
	}
	n, err := copyDirect(f, resp.Body)
	if err != nil {
		return result{}, fmt.Errorf("write %s: %w", path, err)
	}
	return result{Device: path, Bytes: n, Seconds: time.Since(start).Seconds()}, nil
}

// copyDirect copies r to f in whole blocks from a block-aligned buffer, as
// O_DIRECT needs; a last partial block is written with O_DIRECT turned
// off, as dd does.
func copyDirect(f *os.File, r io.Reader) (int64, error) {
	raw := make([]byte, blockSize+4096)
	off := 0
	if a := alignment(raw); a != 0 {
		off = 4096 - a
	}
	buf := raw[off : off+blockSize]
	var total int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if n%512 != 0 {
				if fl, ferr := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); ferr == nil {
					_, _ = unix.FcntlInt(f.Fd(), unix.F_SETFL, fl&^unix.O_DIRECT)
				}
			}
			w, werr := f.Write(buf[:n])
			total += int64(w)
			if werr != nil {
				return total, werr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// alignment is the buffer's start address modulo 4096.
func alignment(b []byte) int { return int(uintptr(unsafe.Pointer(&b[0])) % 4096) }
