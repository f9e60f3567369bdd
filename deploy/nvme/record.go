package nvme

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
)

// Exchange is one admin command as the kernel saw it and what came back:
// the recorded form of testdata (a JSON list of them).
type Exchange struct {
	// Command is the 72-byte struct nvme_admin_cmd in hex, the data
	// pointer zeroed, result as written back.
	Command string `json:"command"`
	// What names the command for a reader of the file.
	What string `json:"what"`
	// Status is the NVMe status the ioctl returned (0: success).
	Status uint16 `json:"status,omitempty"`
	// Errno is the ioctl's error when it failed before the controller
	// answered.
	Errno string `json:"errno,omitempty"`
	// Data is the data buffer after the command, in hex (controller to
	// host transfers only; empty otherwise).
	Data string `json:"data,omitempty"`
}

// Recorder wraps a Device and records every exchange.
type Recorder struct {
	Device
	mu        sync.Mutex
	exchanges []Exchange
}

// Admin sends cmd and records it.
func (r *Recorder) Admin(cmd *Command, data []byte) error {
	err := r.Device.Admin(cmd, data)
	b := cmd.Marshal(0)
	x := Exchange{Command: hex.EncodeToString(b[:]), What: cmd.String()}
	if s, ok := IsStatus(err); ok {
		x.Status = s.Status
	} else if err != nil {
		x.Errno = err.Error()
	}
	if len(data) > 0 && (err == nil || x.Status != 0) {
		x.Data = hex.EncodeToString(data)
	}
	r.mu.Lock()
	r.exchanges = append(r.exchanges, x)
	r.mu.Unlock()
	return err
}

// Exchanges returns what was recorded so far.
func (r *Recorder) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Exchange(nil), r.exchanges...)
}

// Replay is a Device that answers from recorded exchanges, in order: each
// command sent must equal the next recorded one byte for byte (result
// aside). It is for tests and for the agent's fixture trees.
type Replay struct {
	NSID      uint32 // what NamespaceID returns
	Exchanges []Exchange
	// Sent counts the exchanges replayed.
	Sent int
}

// ParseExchanges reads a recorded JSON list.
func ParseExchanges(b []byte) ([]Exchange, error) {
	var xs []Exchange
	if err := json.Unmarshal(b, &xs); err != nil {
		return nil, fmt.Errorf("nvme: recorded exchanges: %w", err)
	}
	for i, x := range xs {
		c, err := hex.DecodeString(x.Command)
		if err != nil || len(c) != CommandSize {
			return nil, fmt.Errorf("nvme: recorded exchange %d: command is not %d bytes of hex", i, CommandSize)
		}
		if _, err := hex.DecodeString(x.Data); err != nil {
			return nil, fmt.Errorf("nvme: recorded exchange %d: data: %w", i, err)
		}
	}
	return xs, nil
}

// Admin answers cmd with the next recorded exchange.
func (r *Replay) Admin(cmd *Command, data []byte) error {
	if r.Sent >= len(r.Exchanges) {
		return fmt.Errorf("replay: %s sent after the %d recorded exchanges", cmd.String(), len(r.Exchanges))
	}
	x := r.Exchanges[r.Sent]
	r.Sent++
	want, err := hex.DecodeString(x.Command)
	if err != nil || len(want) != CommandSize {
		return fmt.Errorf("replay: exchange %d: bad command", r.Sent-1)
	}
	sent := cmd.Marshal(0)
	clear(want[68:72]) // result: written by the controller
	clear(sent[68:72])
	if !bytes.Equal(sent[:], want) {
		return fmt.Errorf("replay: exchange %d: sent %s %x, recorded %s %x", r.Sent-1, cmd.String(), sent, x.What, want)
	}
	rec, _ := UnmarshalCommand(mustHex(x.Command))
	cmd.Result = rec.Result
	if x.Errno != "" {
		return fmt.Errorf("replay: %s: %s", cmd.String(), x.Errno)
	}
	if x.Data != "" {
		d := mustHex(x.Data)
		if len(d) != len(data) {
			return fmt.Errorf("replay: exchange %d: %d recorded data bytes for a %d-byte buffer", r.Sent-1, len(d), len(data))
		}
		copy(data, d)
	}
	if x.Status != 0 {
		return &StatusError{Command: cmd.String(), Status: x.Status}
	}
	return nil
}

// Close does nothing: a replay holds no device.
func (r *Replay) Close() error { return nil }

// NamespaceID returns r.NSID.
func (r *Replay) NamespaceID() (uint32, error) {
	if r.NSID == 0 {
		return 0, fmt.Errorf("replay: not a namespace device")
	}
	return r.NSID, nil
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}
