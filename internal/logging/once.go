package logging

import (
	"log/slog"
	"sync"
)

// Once logs a warning the first time its key is seen and never again, so a
// pass repeated every few seconds, or a bad file that feeds several fields,
// warns once. The zero value is ready; it is safe for concurrent use.
type Once struct {
	mu   sync.Mutex
	said map[string]bool
}

// Warn logs msg and args at warning level on log, unless a warning with the
// same key was logged already. It reports whether it logged.
func (o *Once) Warn(log *slog.Logger, key, msg string, args ...any) bool {
	o.mu.Lock()
	seen := o.said[key]
	if o.said == nil {
		o.said = map[string]bool{}
	}
	o.said[key] = true
	o.mu.Unlock()
	if seen {
		return false
	}
	log.Warn(msg, args...)
	return true
}
