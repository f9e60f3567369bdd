package logtext

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestMsg(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"routes", `msg=routes`},
		{"module", `msg=module`},
		{"agent API listening", `msg="agent API listening"`},
		{"lookup failed; retrying", `msg="lookup failed; retrying"`},
		{"a=b", `msg="a=b"`},
		{`say "hi"`, `msg="say \"hi\""`},
		{"", `msg=""`},
		{"tab\there", `msg="tab\there"`},
		{"résumé", `msg=résumé`},
	} {
		if got := Msg(tc.msg); got != tc.want {
			t.Errorf("Msg(%q) = %s, want %s", tc.msg, got, tc.want)
		}
	}
}

// TestMsgOnALine checks that Msg's text is found on a full line a
// TextHandler writes (time, level, message and attributes), as the tests
// match it on the console.
func TestMsgOnALine(t *testing.T) {
	for _, msg := range []string{"routes", "agent API listening", "device erase finished", `x="y"`} {
		var b bytes.Buffer
		slog.New(slog.NewTextHandler(&b, nil)).With("component", "init").Info(msg, "device", "/dev/sda")
		line := b.String()
		if !strings.Contains(line, " "+Msg(msg)+" component=init device=/dev/sda\n") {
			t.Errorf("line %q does not hold %s", line, Msg(msg))
		}
	}
}
