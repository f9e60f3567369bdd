package rescue

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openPTY allocates a pseudo-terminal pair through /dev/ptmx (devpts must
// be mounted on /dev/pts).
func openPTY() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	var n int
	err = control(m, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		var err error
		n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN)
		return err
	})
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("pseudo-terminal /dev/ptmx: %w", err)
	}
	name := "/dev/pts/" + strconv.Itoa(n)
	s, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	return m, s, nil
}

func setWinsize(f *os.File, w winsize) error {
	return control(f, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(min(w.cols, 0xffff)), Row: uint16(min(w.rows, 0xffff))})
	})
}

// control runs fn on f's descriptor without making it blocking (Fd would),
// so a Close still ends a pending Read.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
