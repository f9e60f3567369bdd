// Package logging holds the agent's one rule for optional loggers: every
// package takes a *slog.Logger in its options, and nil means "say nothing".
package logging

import "log/slog"

// OrDiscard returns l, or a logger that drops every record when l is nil,
// so callers log without nil checks.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
