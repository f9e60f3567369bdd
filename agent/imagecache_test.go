package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy/image"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

func TestImageCacheRules(t *testing.T) {
	var c imageCache
	cached := &image.ImageInfo{ID: "a", DiskFormat: "qcow2", StreamRawImages: true}
	streamed := &image.ImageInfo{ID: "b", DiskFormat: "raw", StreamRawImages: true}
	rawNotStreamed := &image.ImageInfo{ID: "c", DiskFormat: "raw"}
	if c.hit("", "") || c.hit("a", "/dev/x") {
		t.Fatal("an empty cache hits")
	}
	c.written(cached, "/dev/x")
	if !c.hit("a", "/dev/x") {
		t.Error("no hit for the image just written")
	}
	if c.hit("a", "/dev/y") {
		t.Error("hit on another install device")
	}
	if c.hit("b", "/dev/x") {
		t.Error("hit for another image id")
	}
	// IPA caches only what it did not stream: a raw image with
	// stream_raw_images is written again when sent again.
	c.forget()
	c.written(streamed, "/dev/x")
	if c.hit("b", "/dev/x") {
		t.Error("a streamed raw image counts as cached")
	}
	c.written(rawNotStreamed, "/dev/x")
	if !c.hit("c", "/dev/x") {
		t.Error("a raw image written without streaming is not cached")
	}
	c.forget()
	if c.hit("c", "/dev/x") {
		t.Error("hit after forget")
	}
}

// prepare_image sent again for the image last written skips the download
// and the write, as IPA's cached_image_id does, and only then.
func TestPrepareImageCacheOnLoop(t *testing.T) {
	dev := looptest.Attach(t, 32<<20)
	img := mbrTestImage(4<<20, 0x11223344)
	sum := sha256.Sum256(img)
	var gets atomic.Int32
	url := countingImageServer(t, img, &gets)
	ra := standalone(t, Options{Hooks: Hooks{Machine: &fakeMachine{}, ShutdownDelay: time.Millisecond}}, map[string]string{
		"allowed_devices": dev, "image_download_connection_retries": "0", "image_download_connection_retry_interval": "0"})
	node := map[string]any{"uuid": "n1", "properties": map[string]any{"root_device": map[string]any{"name": dev}}}

	deployImage := func(id string, stream bool, hash string) agentclient.Reply {
		t.Helper()
		info := map[string]any{
			"id": id, "urls": []string{url}, "disk_format": "raw", "container_format": "bare",
			"stream_raw_images": stream, "os_hash_algo": "sha256", "os_hash_value": hash, "node_uuid": "n1",
		}
		body, _ := json.Marshal(map[string]any{"name": "deploy.execute_deploy_step", "params": map[string]any{
			"step":           map[string]any{"interface": "deploy", "step": "write_image", "args": map[string]any{"image_info": info}},
			"node":           node,
			"ports":          []any{},
			"deploy_version": map[string]any{"generic_hardware_manager": GenericManagerVersion},
		}})
		ironicPost(t, ra, string(body), false)
		return pollLast(t, ra, "execute_deploy_step")
	}
	good := hex.EncodeToString(sum[:])
	expect := func(what string, res agentclient.Reply, ok bool, wantGets int32) {
		t.Helper()
		if ok && res.Status != "SUCCEEDED" || !ok && res.Status != "FAILED" {
			t.Fatalf("%s: %s %s", what, res.Status, res.Error)
		}
		if ok && !strings.Contains(string(res.Result), "root_uuid=0x11223344") {
			t.Errorf("%s: result %s", what, res.Result)
		}
		if g := gets.Load(); g != wantGets {
			t.Errorf("%s: %d image requests so far, want %d", what, g, wantGets)
		}
	}

	expect("first write", deployImage("img-a", false, good), true, 1)
	expect("same image again (cache hit)", deployImage("img-a", false, good), true, 1)
	// A hit does not depend on the new request's streaming flag: IPA
	// checks the id before choosing how to write.
	expect("same image, now streamed", deployImage("img-a", true, good), true, 1)

	// Another id is written; a failed write forgets the cache, so the
	// first image is written again afterwards.
	bad := strings.Repeat("0", 64)
	expect("other image, wrong checksum", deployImage("img-b", false, bad), false, 2)
	expect("first image after a failed write", deployImage("img-a", false, good), true, 3)

	// An erase step forgets it (fast-track: clean, then deploy again).
	if _, err := ra.agent.generic.ExecuteStep(context.Background(), "erase_devices_metadata", hwmgr.Request{Node: map[string]any{"uuid": "n1"}}); err != nil {
		t.Fatal(err)
	}
	expect("same image after an erase step", deployImage("img-a", false, good), true, 4)

	// A streamed raw image is never cached (IPA's _stream_raw_image_onto_device
	// does not set cached_image_id), so it is written every time.
	expect("streamed raw image", deployImage("img-c", true, good), true, 5)
	expect("streamed raw image again", deployImage("img-c", true, good), true, 6)
}
