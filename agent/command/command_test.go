package command

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

func exts() map[string]Extension {
	return map[string]Extension{
		"standby": {
			"prepare_image": {Async: true, Bind: func(Params) (Func, error) {
				return func(context.Context) (any, error) { return "image (x) written to device /dev/loop3", nil }, nil
			}},
			"get_partition_uuids": {Bind: func(Params) (Func, error) {
				return func(context.Context) (any, error) { return "sync text", nil }, nil
			}},
		},
		"deploy": {
			"execute_deploy_step": {Async: true, Bind: func(Params) (Func, error) {
				return func(ctx context.Context) (any, error) { return nil, errors.New("unused") }, nil
			}},
		},
	}
}

// A nested command returns what its command_result would be, and is never
// added to the list (Ironic reads only the last entry).
func TestRunNested(t *testing.T) {
	e := NewExecutor(context.Background(), exts(), nil, nil)
	v, err := e.RunNested(context.Background(), "standby.prepare_image", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	if string(b) != `{"result":"prepare_image: image (x) written to device /dev/loop3"}` {
		t.Errorf("nested async result %s", b)
	}
	v, _ = e.RunNested(context.Background(), "standby.get_partition_uuids", nil)
	if b, _ := json.Marshal(v); string(b) != `{"result":"sync text"}` {
		t.Errorf("nested sync result %s", b)
	}
	if len(e.List()) != 0 {
		t.Errorf("nested commands recorded")
	}
	if _, err := e.RunNested(context.Background(), "standby.nope", nil); err == nil {
		t.Errorf("unknown nested command accepted")
	}
}

func TestVersionMismatchStatus(t *testing.T) {
	x := map[string]Extension{"clean": {"execute_clean_step": {Async: true, Bind: func(Params) (Func, error) {
		return func(context.Context) (any, error) { return nil, ipaerror.VersionMismatch(`{"a":"1"}`, `{"a":"2"}`) }, nil
	}}}}
	e := NewExecutor(context.Background(), x, nil, nil)
	r, err := e.Execute("clean.execute_clean_step", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-r.Done()
	b, _ := json.Marshal(r)
	want := `{"id":"` + r.ID() + `","command_name":"execute_clean_step","command_status":"CLEAN_VERSION_MISMATCH","command_error":{"type":"VersionMismatch","code":409,"message":"Hardware managers version mismatch, reload agent with correct version","details":"Current versions: {\"a\":\"1\"}, versions used by ironic: {\"a\":\"2\"}"},"command_result":null}`
	if string(b) != want {
		t.Errorf("\n got %s\nwant %s", b, want)
	}
}

// TestResultID checks command ids are random (version 4) UUIDs, as IPA's
// uuid.uuid4() ids are.
func TestResultID(t *testing.T) {
	e := NewExecutor(t.Context(), nil, nil, nil)
	r := e.RecordFailed("x", errors.New("x"))
	u, err := uuid.Parse(r.ID())
	if err != nil || u.Version() != 4 || len(r.ID()) != 36 {
		t.Errorf("command id %q: version %d, %v", r.ID(), u.Version(), err)
	}
}
