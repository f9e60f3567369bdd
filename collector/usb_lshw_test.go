package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// usbTestDevice is one device of a random USB topology.
type usbTestDevice struct {
	bus, devnum, level, parentDevnum, port int // port is 1-based, as in sysfs names
	name                                   string
	class                                  uint8
	ifaces                                 []uint8
	vendor, product                        uint16
	manufacturer, productName              *string
	children                               []*usbTestDevice
}

// randomUSBString is a descriptor string with characters lshw keeps and
// characters it cuts at ('{', '|', '~', UTF-8).
func randomUSBString(r *rand.Rand) *string {
	if r.IntN(2) == 0 {
		return nil // usb.ids names the device, if it knows it
	}
	alphabet := []string{"a", "Z", "0", " ", "-", ".", "=", "{", "|", "~", "é", "Acme ", "Corp"}
	var b strings.Builder
	for range r.IntN(30) {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	s := b.String()
	return &s
}

// randomUSBBus builds bus b: a root hub and a random tree below it.
func randomUSBBus(r *rand.Rand, b int) *usbTestDevice {
	root := &usbTestDevice{bus: b, devnum: 1, name: fmt.Sprintf("usb%d", b), class: 0x09, ifaces: []uint8{0x09}}
	next := 2
	var grow func(parent *usbTestDevice, depth int)
	grow = func(parent *usbTestDevice, depth int) {
		ports := 1 + r.IntN(3)
		lone := r.IntN(3) > 0 // one device on this hub: the case lshw names "usb"
		for port := 1; port <= ports; port++ {
			if lone && port > 1 || !lone && r.IntN(3) == 0 {
				continue // empty port
			}
			// Most IDs are in the test's usb.ids.
			ids := [][2]uint16{{0x1d6b, 0x0002}, {0x0781, 0x5567}, {0x0781, uint16(r.Uint32())}, {uint16(r.Uint32()), uint16(r.Uint32())}}[r.IntN(4)]
			d := &usbTestDevice{bus: b, devnum: next, level: parent.level + 1, parentDevnum: parent.devnum, port: port,
				vendor: ids[0], product: ids[1],
				manufacturer: randomUSBString(r), productName: randomUSBString(r)}
			next++
			if parent.level == 0 {
				d.name = fmt.Sprintf("%d-%d", b, port)
			} else {
				d.name = fmt.Sprintf("%s.%d", parent.name, port)
			}
			// Generic classes (vendor-specific, imaging, CDC data, smart
			// card, misc) weigh as much as the others together.
			classes := []uint8{0x00, 0x00, 0xff, 0xff, 0x06, 0x0a, 0x0b, 0xef, 0xef, 0x01, 0x02, 0x03, 0x07, 0x08, 0x0e, 0xe0}
			if depth < 2 && r.IntN(3) == 0 {
				d.class, d.ifaces = 0x09, []uint8{0x09}
			} else {
				d.class = classes[r.IntN(len(classes))]
				for range 1 + r.IntN(3) {
					d.ifaces = append(d.ifaces, classes[2+r.IntN(len(classes)-2)])
				}
			}
			parent.children = append(parent.children, d)
			if d.class == 0x09 {
				grow(d, depth+1)
			}
		}
	}
	grow(root, 0)
	return root
}

// debugfs writes the device as /sys/kernel/debug/usb/devices lists it
// (drivers/usb/core/devices.c), which is what lshw reads.
func (d *usbTestDevice) debugfs(w *strings.Builder, cnt int) {
	fmt.Fprintf(w, "T:  Bus=%02d Lev=%02d Prnt=%02d Port=%02d Cnt=%02d Dev#=%3d Spd=480  MxCh=%2d\n",
		d.bus, d.level, d.parentDevnum, max(d.port-1, 0), cnt, d.devnum, len(d.children))
	fmt.Fprintf(w, "D:  Ver= 2.00 Cls=%02x(xxxxx) Sub=00 Prot=00 MxPS=64 #Cfgs=  1\n", d.class)
	fmt.Fprintf(w, "P:  Vendor=%04x ProdID=%04x Rev=01.00\n", d.vendor, d.product)
	if d.manufacturer != nil {
		fmt.Fprintf(w, "S:  Manufacturer=%.100s\n", *d.manufacturer)
	}
	if d.productName != nil {
		fmt.Fprintf(w, "S:  Product=%.100s\n", *d.productName)
	}
	fmt.Fprintf(w, "C:* #Ifs=%2d Cfg#= 1 Atr=a0 MxPwr=100mA\n", len(d.ifaces))
	for i, c := range d.ifaces {
		fmt.Fprintf(w, "I:* If#=%2d Alt= 0 #EPs= 1 Cls=%02x(xxxxx) Sub=00 Prot=00 Driver=(none)\n", i, c)
	}
	w.WriteString("\n")
	for i, c := range d.children {
		c.debugfs(w, i+1)
	}
}

// sysfs writes the device's attributes as sys/bus/usb/devices has them.
func (d *usbTestDevice) sysfs(files map[string]string) {
	p := "sys/bus/usb/devices/" + d.name + "/"
	files[p+"bDeviceClass"] = fmt.Sprintf("%02x\n", d.class)
	files[p+"busnum"] = fmt.Sprintf("%d\n", d.bus)
	files[p+"devnum"] = fmt.Sprintf("%d\n", d.devnum)
	files[p+"idVendor"] = fmt.Sprintf("%04x\n", d.vendor)
	files[p+"idProduct"] = fmt.Sprintf("%04x\n", d.product)
	if d.manufacturer != nil {
		files[p+"manufacturer"] = *d.manufacturer + "\n"
	}
	if d.productName != nil {
		files[p+"product"] = *d.productName + "\n"
	}
	for i, c := range d.ifaces {
		files[fmt.Sprintf("%s%s:1.%d/bInterfaceClass", p, d.name, i)] = fmt.Sprintf("%02x\n", c)
	}
	for _, c := range d.children {
		c.sysfs(files)
	}
}

// lshwUSBDevices runs lshw with debugfs's USB list replaced by text, in a
// private mount namespace (nothing of it outlives the command), and
// returns what IPA's get_usb_devices takes from its JSON.
// A usb.ids file (ids) is put in /usr/local/share, on lshw's search path,
// the same way.
func lshwUSBDevices(t *testing.T, text, ids string) []USBDevice {
	t.Helper()
	dir := t.TempDir()
	file, idsFile := filepath.Join(dir, "devices"), filepath.Join(dir, "usb.ids")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(idsFile, []byte(ids), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := `mount -t tmpfs ironic-agent-test /sys/kernel/debug && mkdir /sys/kernel/debug/usb && cp "$1" /sys/kernel/debug/usb/devices &&
		mount -t tmpfs ironic-agent-test /usr/local/share && cp "$2" /usr/local/share/usb.ids && exec lshw -json -quiet`
	out, err := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", file, idsFile).Output()
	if err != nil {
		t.Fatalf("lshw in a mount namespace: %v", err)
	}
	var doc any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("lshw -json: %v", err)
	}
	if l, ok := doc.([]any); ok && len(l) > 0 { // newer lshw prints a list
		doc = l[0]
	}
	devs := []USBDevice{}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		children, _ := n["children"].([]any)
		for _, c := range children {
			child, _ := c.(map[string]any)
			if child["id"] == "usb" && child["class"] == "generic" {
				s := func(k string) string { v, _ := child[k].(string); return v }
				devs = append(devs, USBDevice{Product: s("product"), Vendor: s("vendor"), Handle: s("handle")})
			}
			walk(child)
		}
	}
	top, _ := doc.(map[string]any)
	walk(top)
	return devs
}

// TestUSBDevicesAgreeWithLshw builds random USB topologies, gives lshw
// their debugfs listing and our collector their sysfs view, and compares
// our list with what IPA takes from lshw's JSON.
func TestUSBDevicesAgreeWithLshw(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: lshw reads the USB list from debugfs, replaced in a private mount namespace")
	}
	for _, prog := range []string{"lshw", "unshare"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s is not installed (Debian packages lshw, util-linux): no oracle for usb-devices", prog)
		}
	}
	for _, p := range []string{"/usr/share/lshw-common/usb.ids", "/usr/share/lshw/usb.ids",
		"/usr/share/usb.ids", "/etc/usb.ids", "/usr/share/hwdata/usb.ids", "/usr/share/misc/usb.ids"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s exists: lshw would merge it with the test's usb.ids, we read one file", p)
		}
	}
	const ids = "# test ids\n1d6b  Linux Foundation\n\t0001  1.1 root hub\n\t0002  2.0 root hub\n" +
		"0781  SanDisk Corp.\n\t5567  Cruzer Blade\nC 09  Hub\n\t00  Unused\n"
	r := rand.New(rand.NewPCG(7, 2026))
	start := time.Now()
	found := 0
	const runs = 16
	for run := range runs {
		var text strings.Builder
		files := map[string]string{}
		for b := 1; b <= 8; b++ {
			root := randomUSBBus(r, b)
			root.debugfs(&text, 0)
			for _, c := range root.children {
				c.sysfs(files)
			}
		}
		files["usr/local/share/usb.ids"] = ids
		want := lshwUSBDevices(t, text.String(), ids)
		got, err := USBDevices(context.Background(), Options{Root: tree(t, files)})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Fatalf("run %d: usb_devices %s\nlshw gives %s\ndebugfs:\n%s", run, a, b, text.String())
		}
		found += len(want)
	}
	t.Logf("%d topologies of 8 buses, %d devices listed, %s", runs, found, time.Since(start).Round(time.Millisecond))
}
