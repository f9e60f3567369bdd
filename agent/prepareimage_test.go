package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// imageServerForTest serves data at /disk.img on a port of deploy-image's
// range and returns the URL.
func imageServerForTest(t *testing.T, data []byte) string {
	t.Helper()
	return countingImageServer(t, data, nil)
}

// countingImageServer is imageServerForTest counting the requests in gets
// (when not nil).
func countingImageServer(t *testing.T, data []byte, gets *atomic.Int32) string {
	t.Helper()
	var ln net.Listener
	for p := 9350; p < 9400 && ln == nil; p++ {
		ln, _ = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	}
	if ln == nil {
		t.Fatal("no free port in 9350-9399")
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gets != nil {
			gets.Add(1)
		}
		http.ServeContent(w, r, "disk.img", time.Unix(1700000000, 0), bytes.NewReader(data))
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/disk.img"
}

// mbrTestImage is n bytes of a pattern with an MBR (disk signature sig)
// holding one Linux partition: prepare_image checks, as IPA's
// _validate_partitioning does, that the written disk has partitions.
func mbrTestImage(n int, sig uint32) []byte {
	img := make([]byte, n)
	for i := range img {
		img[i] = byte(i*7 + i>>13)
	}
	clear(img[440:512])
	binary.LittleEndian.PutUint32(img[440:], sig)
	img[446+4] = 0x83
	binary.LittleEndian.PutUint32(img[446+8:], 2048)
	binary.LittleEndian.PutUint32(img[446+12:], uint32(n/512-2048))
	img[510], img[511] = 0x55, 0xaa
	return img
}

// The write_image deploy step through the REST API, as Ironic 21.4 sends
// it: the image lands on the allowed loop device, the result is
// prepare_image's, the nested prepare_image is not listed, and
// get_partition_uuids answers the MBR signature.
func TestWriteImageDeployStepOnLoop(t *testing.T) {
	dev := looptest.Attach(t, 32<<20)
	img := mbrTestImage(8<<20+512, 0xdeadbeef)
	sum := sha256.Sum256(img)
	url := imageServerForTest(t, img)
	ra := standalone(t, Options{Hooks: Hooks{Machine: &fakeMachine{}, ShutdownDelay: time.Millisecond}}, map[string]string{"allowed_devices": dev})

	code, r := call(t, ra, "deploy.get_deploy_steps", map[string]any{"node": map[string]any{"uuid": "n1"}, "ports": []any{}})
	if code != 200 || !strings.Contains(string(mustJSON(r["command_result"])), `"write_image"`) {
		t.Fatalf("get_deploy_steps %d %v", code, r)
	}
	imageInfo := map[string]any{
		"id": "img-1", "urls": []string{url}, "disk_format": "raw", "container_format": "bare",
		"stream_raw_images": true, "os_hash_algo": "sha256", "os_hash_value": hex.EncodeToString(sum[:]),
		"node_uuid": "n1",
	}
	body, _ := json.Marshal(map[string]any{"name": "deploy.execute_deploy_step", "params": map[string]any{
		"step": map[string]any{"interface": "deploy", "step": "write_image", "args": map[string]any{"image_info": imageInfo, "configdrive": nil}},
		// The loop device is smaller than IPA's 4 GiB minimum: a
		// root-device hint names it.
		"node":           map[string]any{"uuid": "n1", "properties": map[string]any{"root_device": map[string]any{"name": dev}}},
		"ports":          []any{},
		"deploy_version": map[string]any{"generic_hardware_manager": GenericManagerVersion},
	}})
	ironicPost(t, ra, string(body), false)
	res := pollLast(t, ra, "execute_deploy_step")
	if res.Status != "SUCCEEDED" {
		t.Fatalf("write_image %s: %s", res.Status, res.Error)
	}
	want := fmt.Sprintf(`{"deploy_result":{"result":"prepare_image: image (img-1) written to device %s root_uuid=0xdeadbeef"}`, dev)
	if !strings.HasPrefix(string(res.Result), want) {
		t.Errorf("command_result %s\nwant prefix %s", res.Result, want)
	}
	if cmds := listCommands(t, ra); len(cmds) != 2 || cmds[1] != "execute_deploy_step:SUCCEEDED" {
		t.Errorf("command list %v: prepare_image must not be listed", cmds)
	}
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(img))
	_, err = io.ReadFull(f, got)
	f.Close()
	if err != nil || !bytes.Equal(got, img) {
		t.Fatalf("device content differs from the image (%v)", err)
	}
	code, r = call(t, ra, "standby.get_partition_uuids", map[string]any{})
	if code != 200 || string(mustJSON(r["command_result"])) != `{"root uuid":"0xdeadbeef"}` {
		t.Errorf("get_partition_uuids %d %v", code, r)
	}

	// An image without a partition table fails the step, as in IPA.
	junk := make([]byte, 1<<20)
	junkSum := sha256.Sum256(junk)
	imageInfo["urls"] = []string{imageServerForTest(t, junk)}
	imageInfo["os_hash_value"] = hex.EncodeToString(junkSum[:])
	imageInfo["id"] = "img-2"
	body, _ = json.Marshal(map[string]any{"name": "deploy.execute_deploy_step", "params": map[string]any{
		"step":           map[string]any{"interface": "deploy", "step": "write_image", "args": map[string]any{"image_info": imageInfo}},
		"node":           map[string]any{"uuid": "n1", "properties": map[string]any{"root_device": map[string]any{"name": dev}}},
		"ports":          []any{},
		"deploy_version": map[string]any{"generic_hardware_manager": GenericManagerVersion},
	}})
	ironicPost(t, ra, string(body), false)
	res = pollLast(t, ra, "execute_deploy_step")
	if res.Status != "FAILED" || !strings.Contains(string(res.Error), "No partitions found on the device "+dev+" after writing the image.") {
		t.Errorf("image without partitions: %s %s", res.Status, res.Error)
	}

	// Bad image_info is a 400 with IPA's words, before anything runs.
	bad, err := ra.api().Post(t.Context(), "standby.prepare_image", map[string]any{"image_info": map[string]any{"id": "x"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if bad.HTTPStatus != 400 || !strings.Contains(string(bad.Body), `Image is missing 'urls' field.`) {
		t.Errorf("invalid image_info: %d %s", bad.HTTPStatus, bad.Body)
	}
}
