package bmc

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Recording is the content of a fixture's ipmi.json: every request the
// agent sent to the BMC and what came back. Requests and responses are hex
// (the response starts with the completion code).
type Recording struct {
	// Comment says where the recording came from.
	Comment   string     `json:"comment,omitempty"`
	Exchanges []Exchange `json:"exchanges"`
}

// Exchange is one request and its response, or the error that came
// instead (a timeout, a driver error).
type Exchange struct {
	NetFn    uint8  `json:"netfn"`
	Cmd      uint8  `json:"cmd"`
	Request  string `json:"request"`
	Response string `json:"response,omitempty"`
	Error    string `json:"error,omitempty"`
	// Note explains a hand-made exchange to the reader; it is ignored.
	Note string `json:"note,omitempty"`
}

// Replay answers requests from a Recording. A request that was not
// recorded gets an error, as a BMC that never answers would.
type Replay struct {
	byReq map[string]Exchange
}

// NewReplay checks a recording and indexes it.
func NewReplay(rec Recording) (*Replay, error) {
	r := &Replay{byReq: map[string]Exchange{}}
	for i, ex := range rec.Exchanges {
		if _, err := hex.DecodeString(ex.Request); err != nil {
			return nil, fmt.Errorf("exchange %d: request %q is not hex: %w", i, ex.Request, err)
		}
		if _, err := hex.DecodeString(ex.Response); err != nil {
			return nil, fmt.Errorf("exchange %d: response %q is not hex: %w", i, ex.Response, err)
		}
		if ex.Response == "" && ex.Error == "" {
			return nil, fmt.Errorf("exchange %d (%s): neither a response nor an error", i, replayKey(ex.NetFn, ex.Cmd, ex.Request))
		}
		k := replayKey(ex.NetFn, ex.Cmd, ex.Request)
		if _, dup := r.byReq[k]; dup {
			return nil, fmt.Errorf("exchange %d: request %s recorded twice", i, k)
		}
		r.byReq[k] = ex
	}
	return r, nil
}

// LoadReplay reads an ipmi.json file.
func LoadReplay(path string) (*Replay, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rec Recording
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r, err := NewReplay(rec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

func replayKey(netfn, cmd uint8, reqHex string) string {
	return fmt.Sprintf("%02x/%02x/%s", netfn, cmd, reqHex)
}

// ErrNotRecorded is returned by Replay for a request it has no answer for.
var ErrNotRecorded = errors.New("no response recorded for this request")

// Send implements Transport.
func (r *Replay) Send(ctx context.Context, req Request) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ex, ok := r.byReq[replayKey(req.NetFn, req.Cmd, hex.EncodeToString(req.Data))]
	if !ok {
		return nil, ErrNotRecorded
	}
	if ex.Error != "" {
		return nil, errors.New(ex.Error)
	}
	resp, _ := hex.DecodeString(ex.Response) // checked by NewReplay
	return resp, nil
}

// Recorder passes requests to another Transport and keeps every exchange,
// for capture-fixture. It is safe for concurrent use.
type Recorder struct {
	Next Transport

	mu        sync.Mutex
	exchanges []Exchange
	seen      map[string]bool
}

// Send implements Transport.
func (r *Recorder) Send(ctx context.Context, req Request) ([]byte, error) {
	resp, err := r.Next.Send(ctx, req)
	ex := Exchange{NetFn: req.NetFn, Cmd: req.Cmd, Request: hex.EncodeToString(req.Data)}
	if err != nil {
		ex.Error = err.Error()
	} else {
		ex.Response = hex.EncodeToString(resp)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := replayKey(ex.NetFn, ex.Cmd, ex.Request)
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if !r.seen[k] { // the first answer is the one a replay gives
		r.seen[k] = true
		r.exchanges = append(r.exchanges, ex)
	}
	return resp, err
}

// Recording returns what was recorded so far.
func (r *Recorder) Recording(comment string) Recording {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Recording{Comment: comment, Exchanges: append([]Exchange(nil), r.exchanges...)}
}

// WriteFile writes the recording as indented JSON (an ipmi.json).
func (rec Recording) WriteFile(path string) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
