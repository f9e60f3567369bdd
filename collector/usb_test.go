package collector

import (
	"context"
	"encoding/json"
	"testing"
)

// usbTree is four buses as sysfs lays them out: a hub with two devices
// (lshw renames siblings, so neither is listed), a lone vendor-specific
// device with strings, a lone device known only from usb.ids, and a lone
// mass-storage device (class storage, not generic).
func usbTree(t *testing.T) string {
	return tree(t, map[string]string{
		"sys/bus/usb/devices/usb1/bDeviceClass":                     "09\n",
		"sys/bus/usb/devices/1-1":                                   "-> ../../../devices/pci0000:00/0000:00:14.0/usb1/1-1",
		"sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/bDeviceClass": "09\n",
		"sys/bus/usb/devices/1-1.1/bDeviceClass":                    "00\n",
		"sys/bus/usb/devices/1-1.1/1-1.1:1.0/bInterfaceClass":       "ff\n",
		"sys/bus/usb/devices/1-1.2/bDeviceClass":                    "00\n",
		"sys/bus/usb/devices/1-1.2/1-1.2:1.0/bInterfaceClass":       "03\n",
		"sys/bus/usb/devices/1-1:1.0/bInterfaceClass":               "09\n",

		"sys/bus/usb/devices/2-1/bDeviceClass":            "00\n",
		"sys/bus/usb/devices/2-1/busnum":                  "2\n",
		"sys/bus/usb/devices/2-1/devnum":                  "2\n",
		"sys/bus/usb/devices/2-1/idVendor":                "abcd\n",
		"sys/bus/usb/devices/2-1/idProduct":               "0001\n",
		"sys/bus/usb/devices/2-1/manufacturer":            "  Acme Corp \n",
		"sys/bus/usb/devices/2-1/product":                 "Widget{rev 2}\n",
		"sys/bus/usb/devices/2-1/2-1:1.1/bInterfaceClass": "ff\n",
		"sys/bus/usb/devices/2-1/2-1:1.0/bInterfaceClass": "0a\n",

		"sys/bus/usb/devices/3-4/bDeviceClass": "ef\n",
		"sys/bus/usb/devices/3-4/busnum":       "3\n",
		"sys/bus/usb/devices/3-4/devnum":       "5\n",
		"sys/bus/usb/devices/3-4/idVendor":     "1d6b\n",
		"sys/bus/usb/devices/3-4/idProduct":    "0002\n",
		"usr/share/hwdata/usb.ids": "# comment\n1d6b  Linux Foundation\n\t0001  1.1 root hub\n\t0002  2.0 root hub\n" +
			"C 09  Hub\n\t00  Unused\nffff  not a vendor line in lshw? yes it is\n",

		"sys/bus/usb/devices/4-2/bDeviceClass":            "00\n",
		"sys/bus/usb/devices/4-2/busnum":                  "4\n",
		"sys/bus/usb/devices/4-2/devnum":                  "3\n",
		"sys/bus/usb/devices/4-2/4-2:1.0/bInterfaceClass": "08\n",
	})
}

func TestUSBDevices(t *testing.T) {
	devs, err := USBDevices(context.Background(), Options{Root: usbTree(t)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(devs)
	want := `[{"product":"Widget","vendor":"Acme Corp","handle":"USB:2:2"},{"product":"2.0 root hub","vendor":"Linux Foundation","handle":"USB:3:5"}]`
	if string(b) != want {
		t.Errorf("usb_devices = %s\nwant %s", b, want)
	}
	// No USB at all is an empty list, not an error.
	devs, err = USBDevices(context.Background(), Options{Root: t.TempDir()})
	if err != nil || devs == nil || len(devs) != 0 {
		t.Errorf("no USB: %v, %v", devs, err)
	}
}

func TestLshwUSBString(t *testing.T) {
	for in, want := range map[string]string{
		"  Acme  \n":             "Acme",
		"Widget{2}":              "Widget",
		"\xc3\xa9cole":           "",
		"Tab\there":              "Tab",
		string(make([]byte, 90)): "",
		"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890": "01234567890123456789012345678901234567890123456789012345678901234567890123456789",
	} {
		if got := lshwUSBString([]byte(in)); got != want {
			t.Errorf("lshwUSBString(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseUSBIDs: any usb.ids text parses without a panic.
func FuzzParseUSBIDs(f *testing.F) {
	f.Add([]byte("1d6b  Linux Foundation\n\t0002  2.0 root hub\nC 09  Hub\n\t\t00  Full speed\n"))
	f.Add([]byte("\t\t\t\n\tzzzz\nabc"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := parseUSBIDs(b)
		for _, name := range ids.vendors {
			_ = lshwUSBString([]byte(name))
		}
	})
}

// FuzzParseUSBDeviceName: any sysfs entry name either parses to a device
// with a bus and a port path, or is skipped.
func FuzzParseUSBDeviceName(f *testing.F) {
	for _, s := range []string{"1-1.4", "usb1", "1-1:1.0", "2-1.2.3", "-", "1-", "1-.", "x-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, ok := parseUSBDeviceName(name)
		if ok && (len(n.ports) == 0 || n.parent == "" || n.parent == name) {
			t.Fatalf("%q parsed to %+v", name, n)
		}
	})
}
