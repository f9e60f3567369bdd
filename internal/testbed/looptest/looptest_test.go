package looptest

import (
	"bytes"
	"os"
	"testing"
)

func TestAttachReadDetach(t *testing.T) {
	var dev string
	t.Run("attach", func(t *testing.T) {
		dev = Attach(t, 1<<20, "--partscan")
		f, err := os.OpenFile(dev, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Repeat([]byte{0xA5}, 4096)
		if _, err := f.WriteAt(want, 8192); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := ReadAt(t, dev, 8192, 4096); !bytes.Equal(got, want) {
			t.Error("ReadAt did not return what was written")
		}
		if got := Size(t, dev); got != 1<<20 {
			t.Errorf("Size = %d, want %d", got, 1<<20)
		}
	})
	if dev == "" {
		return
	}
	// The subtest's cleanup has run: the device must be free again.
	b, err := os.ReadFile("/sys/block/" + dev[len("/dev/"):] + "/loop/backing_file")
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		t.Errorf("%s still attached to %s after cleanup", dev, b)
	}
}
