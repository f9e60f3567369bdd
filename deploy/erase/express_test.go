package erase

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/nvme"
	"github.com/ironic-go/ironic-agent/inventory"
)

// fakeQueue is the part of a device's sysfs queue directory the express
// erase could look at. Only discard_max_bytes may decide anything:
// rotational and write_zeroes_max_bytes are there to show they do not
// make the erase write the whole device.
type fakeQueue struct {
	discardMax, writeZeroesMax, rotational int64
}

// fakeDevice makes a 4 MiB regular file standing for the device name
// below a fake root, filled with 0xab, with its sysfs queue attributes
// (and, for an NVMe name, the controller's namespace list).
func fakeDevice(t *testing.T, name string, q fakeQueue) (root, dev string) {
	t.Helper()
	root = t.TempDir()
	if strings.HasPrefix(name, "nvme") {
		fakeNVMeSysfs(t, root)
	}
	queue := filepath.Join(root, "sys/class/block", name, "queue")
	if err := os.MkdirAll(queue, 0o755); err != nil {
		t.Fatal(err)
	}
	for attr, v := range map[string]int64{"discard_max_bytes": q.discardMax, "write_zeroes_max_bytes": q.writeZeroesMax,
		"write_same_max_bytes": q.writeZeroesMax, "rotational": q.rotational, "discard_zeroes_data": 0} {
		if err := os.WriteFile(filepath.Join(queue, attr), []byte(strconv.FormatInt(v, 10)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev = filepath.Join(root, name)
	if err := os.WriteFile(dev, bytes.Repeat([]byte{0xab}, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, dev
}

// fakeIoctls records the range ioctls the erase issues and answers each
// request with the error configured for it (nil: success).
type fakeIoctls struct {
	errs  map[uint]error
	calls []string
}

func (f *fakeIoctls) do(_ *os.File, req uint, off, length uint64) error {
	name := map[uint]string{unix.BLKSECDISCARD: "BLKSECDISCARD", unix.BLKDISCARD: "BLKDISCARD", unix.BLKZEROOUT: "BLKZEROOUT"}[req]
	if name == "" {
		name = "ioctl " + strconv.FormatUint(uint64(req), 16)
	}
	f.calls = append(f.calls, name+" "+strconv.FormatUint(off, 10)+"+"+strconv.FormatUint(length, 10))
	return f.errs[req]
}

// The express erase's decision table, one row per kind of device: what
// sysfs and the drive say, which commands and ioctls run, the method
// reported. No row writes the whole device, and every row but the NVMe
// erases ends with the metadata wipe.
func TestEraseExpressDecisionTable(t *testing.T) {
	const size = "0+4194304"
	ssd := fakeQueue{discardMax: 2 << 30, writeZeroesMax: 0, rotational: 0}
	noSecure := map[uint]error{unix.BLKSECDISCARD: unix.EOPNOTSUPP}
	for _, c := range []struct {
		name     string
		dev      string
		queue    fakeQueue
		nodeOff  bool                   // agent_enable_nvme_secure_erase=false
		nvme     map[string][]nvmeReply // the controller's answers
		ioctlErr map[uint]error
		method   string
		detail   string   // part of the detail; "" = no detail
		calls    []string // admin commands sent
		ioctls   []string
	}{
		{name: "NVMe with crypto sanitize", dev: "nvme0n1", queue: ssd,
			nvme: map[string][]nvmeReply{
				cmdIDCtrl: {{data: idCtrlPage(23, 4, 0x60000003)}}, cmdSanCrypto: {{}},
				cmdSanLog: {{data: sanitizeLogPage(0xffff, nvme.SanitizeDone|nvme.SSTATGlobalDataErased)}}},
			method: MethodNVMeSanitizeCrypto,
			calls:  []string{cmdIDCtrl, cmdSanCrypto, cmdSanLog}},
		{name: "NVMe with crypto format, no sanitize", dev: "nvme0n1", queue: ssd,
			nvme:   formatReplies(23, 4, 0, cmdFormat2, 0),
			method: MethodNVMeCrypto, calls: []string{cmdIDCtrl, cmdIDNS, cmdFormat2}},
		{name: "NVMe with user-data format, no sanitize", dev: "nvme0n1", queue: ssd,
			nvme:   formatReplies(23, 0, 0, cmdFormat1, 0),
			method: MethodNVMeUserData, calls: []string{cmdIDCtrl, cmdIDNS, cmdFormat1}},
		{name: "NVMe without format or sanitize: discard, metadata", dev: "nvme0n1", queue: ssd,
			nvme:     map[string][]nvmeReply{cmdIDCtrl: {{data: idCtrlPage(0x14, 0, 0)}}},
			ioctlErr: noSecure, method: MethodDiscardMetadata, detail: "NVMe secure erase failed: device DEV: the controller reports no supported format modes",
			calls: []string{cmdIDCtrl}, ioctls: []string{"BLKSECDISCARD " + size, "BLKDISCARD " + size}},
		{name: "NVMe, secure erase disabled by the node: discard, metadata", dev: "nvme0n1", queue: ssd, nodeOff: true,
			ioctlErr: noSecure, method: MethodDiscardMetadata,
			ioctls: []string{"BLKSECDISCARD " + size, "BLKDISCARD " + size}},
		{name: "SATA SSD with discard", dev: "sda", queue: ssd, ioctlErr: noSecure,
			method: MethodDiscardMetadata, ioctls: []string{"BLKSECDISCARD " + size, "BLKDISCARD " + size}},
		{name: "device with secure discard (eMMC)", dev: "mmcblk0", queue: ssd,
			method: MethodSecureDiscardMetadata, ioctls: []string{"BLKSECDISCARD " + size}},
		{name: "old kernel: secure discard EINVAL", dev: "mmcblk0", queue: ssd, ioctlErr: map[uint]error{unix.BLKSECDISCARD: unix.EINVAL},
			method: MethodDiscardMetadata, ioctls: []string{"BLKSECDISCARD " + size, "BLKDISCARD " + size}},
		{name: "rotational SAS disk with WRITE SAME, no discard", dev: "sdb",
			queue:  fakeQueue{discardMax: 0, writeZeroesMax: 32 << 20, rotational: 1},
			method: MethodMetadata},
		{name: "virtio disk with write zeroes, no discard", dev: "vda",
			queue:  fakeQueue{discardMax: 0, writeZeroesMax: 1 << 30, rotational: 1},
			method: MethodMetadata},
		{name: "SSD whose discard fails: metadata wipe, detail says why", dev: "sdc", queue: ssd,
			ioctlErr: map[uint]error{unix.BLKSECDISCARD: unix.EOPNOTSUPP, unix.BLKDISCARD: unix.EIO},
			method:   MethodMetadata, detail: "discard failed: BLKDISCARD DEV (bytes 0-4194304): input/output error",
			ioctls: []string{"BLKSECDISCARD " + size, "BLKDISCARD " + size}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, dev := fakeDevice(t, c.dev, c.queue)
			sub := func(s string) string { return strings.ReplaceAll(s, "DEV", dev) }
			f := &fakeNVMe{replies: c.nvme}
			io := &fakeIoctls{errs: c.ioctlErr}
			e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Root: root, rangeIoctl: io.do, nvmeOpen: f.open, sanitizePoll: time.Millisecond}
			o := DefaultEraseOptions()
			o.EnableNVMeSecureErase = !c.nodeOff
			res, err := e.EraseDevicesExpress(context.Background(), []inventory.Disk{{Name: dev}}, o)
			if err != nil {
				t.Fatal(err)
			}
			got := res[dev]
			if got.Method != c.method {
				t.Errorf("method %q, want %q", got.Method, c.method)
			}
			if c.detail == "" && got.Detail != "" || !strings.Contains(got.Detail, sub(c.detail)) {
				t.Errorf("detail %q, want %q", got.Detail, sub(c.detail))
			}
			if !reflect.DeepEqual(f.calls, c.calls) {
				t.Errorf("admin commands %q, want %q", f.calls, c.calls)
			}
			if !reflect.DeepEqual(io.calls, c.ioctls) {
				t.Errorf("ioctls %q, want %q", io.calls, c.ioctls)
			}
			b, err := os.ReadFile(dev)
			if err != nil {
				t.Fatal(err)
			}
			nvmeErased := strings.HasPrefix(c.method, "NVMe")
			if head := b[:512]; !nvmeErased && !bytes.Equal(head, make([]byte, 512)) {
				t.Error("the metadata wipe did not run: the first sector still holds data")
			}
			if mid := b[2<<20 : 2<<20+512]; !bytes.Equal(mid, bytes.Repeat([]byte{0xab}, 512)) {
				t.Error("the middle of the device was written: express must not write the whole device")
			}
			if nvmeErased && got.Bytes != 0 || !nvmeErased && got.Bytes == 0 {
				t.Errorf("bytes written %d for %s", got.Bytes, got.Method)
			}
		})
	}
}

// Every device's result and log line say which method ran and how long
// it took; the result keeps the keys it had (method, detail, bytes).
func TestEraseResultsSayMethodAndDuration(t *testing.T) {
	root, dev := fakeDevice(t, "sda", fakeQueue{discardMax: 1 << 30})
	var logs bytes.Buffer
	io := &fakeIoctls{errs: map[uint]error{unix.BLKSECDISCARD: unix.EOPNOTSUPP}}
	e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Runner: &fakeRunner{}, Root: root, rangeIoctl: io.do,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	o := DefaultEraseOptions()
	o.EnableATASecureErase = false
	disks := []inventory.Disk{{Name: dev}}
	for _, step := range []struct {
		name   string
		run    func(context.Context, []inventory.Disk, EraseOptions) (map[string]DeviceResult, error)
		method string
	}{
		{"erase_devices_express", e.EraseDevicesExpress, MethodDiscardMetadata},
		{"erase_devices_metadata", e.EraseDevicesMetadata, MethodMetadata},
		{"erase_devices", e.EraseDevices, MethodOverwrite},
	} {
		logs.Reset()
		res, err := step.run(context.Background(), disks, o)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		b, _ := json.Marshal(res[dev])
		var wire map[string]any
		if err := json.Unmarshal(b, &wire); err != nil {
			t.Fatal(err)
		}
		secs, ok := wire["seconds"].(float64)
		if wire["method"] != step.method || !ok || secs < 0 {
			t.Errorf("%s: result %s, want method %q and seconds", step.name, b, step.method)
		}
		if _, ok := wire["bytes"]; !ok {
			t.Errorf("%s: result %s lost its bytes key", step.name, b)
		}
		var line struct {
			Msg, Step, Device, Method string
			Seconds                   *float64
		}
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, `"device erase finished"`) {
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatal(err)
				}
			}
		}
		if line.Step != step.name || line.Device != dev || line.Method != step.method || line.Seconds == nil || *line.Seconds != secs {
			t.Errorf("%s: log line %+v, want the step, device, method and the result's seconds (%v); logs:\n%s", step.name, line, secs, logs.String())
		}
	}
}
