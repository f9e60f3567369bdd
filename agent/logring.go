package agent

import (
	"sync"
)

// LogRing keeps the last bytes of the agent's own log in memory, for
// log.collect_system_logs and the inspection "logs" collector: a ramdisk
// has no journal worth trusting, and the agent's log is what an operator
// needs after a failed step.
type LogRing struct {
	mu   sync.Mutex
	buf  []byte
	size int
	full bool
	pos  int
}

// NewLogRing returns a ring holding the last size bytes.
func NewLogRing(size int) *LogRing {
	if size <= 0 {
		size = 1 << 20
	}
	return &LogRing{buf: make([]byte, size), size: size}
}

// Write implements io.Writer; it never fails.
func (r *LogRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if len(p) >= r.size {
		copy(r.buf, p[len(p)-r.size:])
		r.pos, r.full = 0, true
		return n, nil
	}
	k := copy(r.buf[r.pos:], p)
	if k < len(p) {
		copy(r.buf, p[k:])
		r.full = true
	}
	r.pos = (r.pos + len(p)) % r.size
	if r.pos == 0 && len(p) > 0 {
		r.full = true
	}
	return n, nil
}

// Bytes returns the kept log, oldest first.
func (r *LogRing) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]byte(nil), r.buf[:r.pos]...)
	}
	out := make([]byte, 0, r.size)
	out = append(out, r.buf[r.pos:]...)
	return append(out, r.buf[:r.pos]...)
}
