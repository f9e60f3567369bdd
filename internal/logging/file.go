package logging

import (
	"fmt"
	"os"
	"sync"
)

// AgentLogFile is where the agent run by the ramdisk's init keeps its log
// as well as on the console: an operator logged in for debugging reads
// it there (tail -f) while a step runs, since the console's lines cannot be
// read back from a shell.
const AgentLogFile = "/run/ironic-agent/agent.log"

// RotatingFile is a log file of bounded size on a tmpfs (RAM): when a
// write would take it past max bytes it is renamed to path + ".1" (the
// previous ".1" goes) and started anew, so the newest lines are always
// there and at most about twice max bytes are kept. It never fails a
// write: a log must not stop the program it logs; the first error is kept
// for Err, and later lines are dropped until a rotation succeeds.
type RotatingFile struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
	err  error
}

// OpenRotating opens (appends to) path, rotating at max bytes.
func OpenRotating(path string, max int64) (*RotatingFile, error) {
	if max <= 0 {
		return nil, fmt.Errorf("log file %s: size limit %d: want more than 0", path, max)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &RotatingFile{path: path, max: max, f: f, size: st.Size()}, nil
}

// Write implements io.Writer; it always reports success.
func (r *RotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size > 0 && r.size+int64(len(p)) > r.max {
		r.rotate()
	}
	if r.f != nil {
		n, err := r.f.Write(p)
		r.size += int64(n)
		if err != nil && r.err == nil {
			r.err = err
		}
	}
	return len(p), nil
}

// rotate moves the file to path.1 and opens a new one.
func (r *RotatingFile) rotate() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	if err := os.Rename(r.path, r.path+".1"); err != nil && r.err == nil {
		r.err = err
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		if r.err == nil {
			r.err = err
		}
		return
	}
	r.f, r.size = f, 0
}

// Err is the first error a write, rename or open met, or nil.
func (r *RotatingFile) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close closes the file.
func (r *RotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
