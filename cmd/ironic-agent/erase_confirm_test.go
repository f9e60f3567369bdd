package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns the controller and terminal ends of a new pseudo-terminal.
func openPTY(t *testing.T) (controller, term *os.File) {
	t.Helper()
	controller, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("SKIPPED: no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { controller.Close() })
	fd := int(controller.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	return controller, term
}

// metadataImage is a file with data where the metadata wipe zeroes it.
func metadataImage(t *testing.T) (string, []byte) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	data := bytes.Repeat([]byte("precious"), 1<<18) // 2 MiB
	if err := os.WriteFile(img, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return img, data
}

func TestEraseConfirmation(t *testing.T) {
	img, data := metadataImage(t)
	untouched := func(what string) {
		t.Helper()
		if b, _ := os.ReadFile(img); !bytes.Equal(b, data) {
			t.Fatalf("%s: the image changed", what)
		}
	}

	// A script (stdin not a terminal) must say --yes.
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for _, mode := range []string{"--metadata", "--express", "--full"} {
		code, _, stderr := eraseCLI(devnull, img, mode)
		if code != 1 || !strings.Contains(stderr, "stdin is not a terminal") || !strings.Contains(stderr, "add --yes") {
			t.Errorf("%s without a terminal: exit %d, %q", mode, code, stderr)
		}
		untouched(mode + " without a terminal")
	}

	// On a terminal, anything but the device's name or "yes" cancels.
	for _, answer := range []string{"no\n", "\n", "y\n", "disk\n", ""} {
		controller, term := openPTY(t)
		if answer == "" {
			// End of input (Ctrl-D) instead of a line.
			controller.Write([]byte{4})
		} else {
			controller.Write([]byte(answer))
		}
		code, _, stderr := eraseCLI(term, img, "--metadata")
		if code != 1 || !strings.Contains(stderr, `Type "disk.img" or "yes" to go on`) || !strings.Contains(stderr, "not confirmed") {
			t.Errorf("answer %q: exit %d, %q", answer, code, stderr)
		}
		untouched(fmt.Sprintf("answer %q", answer))
	}

	for _, answer := range []string{"disk.img\n", img + "\n", "yes\n"} {
		controller, term := openPTY(t)
		controller.Write([]byte(answer))
		code, stdout, stderr := eraseCLI(term, img, "--metadata")
		if code != 0 || !strings.Contains(stdout, "metadata wipe of "+img+" done") {
			t.Errorf("answer %q: exit %d, stdout %q, stderr %q", answer, code, stdout, stderr)
		}
		if b, _ := os.ReadFile(img); bytes.Equal(b, data) {
			t.Errorf("answer %q: not erased", answer)
		}
		if err := os.WriteFile(img, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
