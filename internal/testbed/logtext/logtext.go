// Package logtext builds the text tests match on a console that carries
// log/slog TextHandler output (the agent's and the ramdisk init's log).
//
// Tests wait for log events by the exported constants of the product
// packages that log them (agent.EventAPIListening, raid.EventArraysAssembled,
// ...), never by a copy of the message text: rewording a log line then
// breaks the build, not a VM test minutes later.
package logtext

import (
	"bytes"
	"log/slog"
	"strings"
)

// Msg returns the "msg=..." field log/slog's TextHandler writes for a record
// whose message is msg: quoted only where slog quotes it (a space, '=', '"',
// a control character, ...). It formats a record with slog itself, so it
// cannot disagree with the handler the product logs with.
func Msg(msg string) string {
	var b bytes.Buffer
	drop := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
			return slog.Attr{}
		}
		return a
	}
	slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: drop})).Info(msg)
	return strings.TrimSuffix(b.String(), "\n")
}
