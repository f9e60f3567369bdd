package ironic

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// LogMark remembers how long each log file was, so that a failed test can
// show only what the services wrote while it ran.
type LogMark struct {
	sizes map[string]int64
	files func() []string
}

// Mark records the current length of every service log.
func (s *Services) Mark() *LogMark {
	m := &LogMark{sizes: map[string]int64{}, files: s.LogFiles}
	for _, f := range s.LogFiles() {
		if st, err := os.Stat(f); err == nil {
			m.sizes[f] = st.Size()
		}
	}
	return m
}

// Since returns, per log file, what was appended after the mark, cut to the
// last maxBytes bytes of each file.
func (m *LogMark) Since(maxBytes int) string {
	var b strings.Builder
	for _, f := range m.files() {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		off := m.sizes[f]
		st, err := fh.Stat()
		if err != nil || st.Size() <= off {
			fh.Close()
			continue
		}
		if st.Size()-off > int64(maxBytes) {
			off = st.Size() - int64(maxBytes)
		}
		data, _ := io.ReadAll(io.NewSectionReader(fh, off, st.Size()-off))
		fh.Close()
		// Ironic logs every request at debug level; the noise is what
		// explains a failure, so keep it, but drop empty lines.
		data = bytes.TrimSpace(data)
		fmt.Fprintf(&b, "----- %s (from byte %d) -----\n%s\n", filepath.Base(f), off, data)
	}
	return b.String()
}
