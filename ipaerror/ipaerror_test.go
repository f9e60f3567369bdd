package ipaerror

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
)

// The JSON shape is IPA's wire format: exactly these four keys, the cause
// never serialised.
func TestErrorJSON(t *testing.T) {
	e := Wrap("ImageWriteError", 500, "Error writing image to device", "Writing image to device /dev/sda failed: EOF", io.EOF)
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"ImageWriteError","code":500,"message":"Error writing image to device","details":"Writing image to device /dev/sda failed: EOF"}`
	if string(b) != want {
		t.Errorf("\n got %s\nwant %s", b, want)
	}
	if !errors.Is(e, io.EOF) {
		t.Error("cause lost")
	}
	if got := e.Error(); got != "Error writing image to device: Writing image to device /dev/sda failed: EOF" {
		t.Errorf("Error() = %q", got)
	}
}

func TestAs(t *testing.T) {
	inner := InvalidCommandParams("bad %s", "x")
	if got := As(fmt.Errorf("outer: %w", inner)); got != inner {
		t.Errorf("As did not find the wrapped *Error: %v", got)
	}
	got := As(io.EOF)
	if got.Type != "CommandExecutionError" || got.Code != 500 || got.Details != "EOF" || !errors.Is(got, io.EOF) {
		t.Errorf("As(io.EOF) = %+v", got)
	}
}
