package vm

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/e2e/ironictest"
	"github.com/ironic-go/ironic-agent/internal/vmtest"
)

// TestVMDeployBIOS is scenario (d) under SeaBIOS: a direct deploy of an
// available node whose ramdisk is the VM. The agent writes a raw image to
// the disk the root-device hint names by serial, Ironic has it power the VM
// off, and the host finds the image's bytes in that disk's file and
// nowhere else.
func TestVMDeployBIOS(t *testing.T) {
	rd := ramdisk(t)
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	macs := [2]string{"52:54:00:6d:03:01", "52:54:00:6d:03:02"}
	agentPort := agentPortBase + 2
	m := serviceMachine(t, rd, "bios", agentPort, macs)
	// As Ironic boots a deploy ramdisk: no inspection callback.
	m.Append = agentArgs(agentPort, false) + " ironic_agent.dhcp=" + macs[0]

	// Available without cleaning: this test is about the deploy.
	// boot_mode:bios as the VM boots: a whole-disk image then needs no
	// boot loader work from the agent.
	noClean := false
	node := enroll(t, ctx, s, ironictest.NodeSpec{Name: "vm-deploy", AutomatedClean: &noClean,
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs)
	// At the end of a BIOS deploy Ironic sets the boot device to disk,
	// which the fake management interface refuses; noop accepts it.
	if err := s.ironic.Patch(ctx, node.UUID, []map[string]any{{"op": "replace", "path": "/management_interface", "value": "noop"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ironic.Provision(ctx, node.UUID, "provide"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "available", time.Minute); err != nil {
		t.Fatal(err)
	}

	// A raw image for the disk named by serial. The image server
	// doubles as the HTTP proxy the agent is told to use (driver_info
	// image_http_proxy): Ironic checks the URL on 127.0.0.1 itself, and the
	// guest reaches it through the proxy's guestfwd.
	target := "LAB-SCSI-0002"
	img := make([]byte, 3<<20+4096)
	r := rand.NewChaCha8([32]byte{'v', 'm'})
	_, _ = r.Read(img)
	copy(img, "ironic-agent VM deploy test image")
	// An MBR with one partition: prepare_image fails a disk without a
	// partition table after the write, as IPA's _validate_partitioning does.
	clear(img[440:512])
	img[446+4] = 0x83
	binary.LittleEndian.PutUint32(img[446+8:], 2048)
	binary.LittleEndian.PutUint32(img[446+12:], 4096)
	img[510], img[511] = 0x55, 0xaa
	imgAddr := serve(t, imagePort, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/image.raw" {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(img))
	}))
	m.GuestFwd[guestHost+":80"] = imgAddr
	sum := sha256.Sum256(img)
	md := md5.Sum(img)
	ops := []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": "http://" + imgAddr + "/image.raw"},
		{"op": "add", "path": "/instance_info/image_checksum", "value": hex.EncodeToString(md[:])},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": hex.EncodeToString(sum[:])},
		{"op": "add", "path": "/instance_info/image_disk_format", "value": "raw"},
		{"op": "add", "path": "/instance_info/root_gb", "value": "0"},
		{"op": "add", "path": "/properties/root_device", "value": map[string]any{"serial": target}},
		{"op": "add", "path": "/driver_info/image_http_proxy", "value": "http://" + guestHost + ":80"},
	}
	if err := s.ironic.Patch(ctx, node.UUID, ops); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.ironic.Provision(ctx, node.UUID, "active"); err != nil {
		t.Fatal(err)
	}
	// Power on once Ironic has "rebooted" the node into the ramdisk.
	if _, err := s.ironic.WaitState(ctx, node.UUID, "wait call-back", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	vm2 := boot(t, ctx, m, vmtest.Options{})
	if _, err := s.ironic.WaitState(ctx, node.UUID, "active", 6*time.Minute); err != nil {
		t.Fatal(err)
	}
	hb := "?"
	if l, ok := vm2.Find("heartbeat successful"); ok {
		hb = fmt.Sprintf("%.1fs", l.At.Seconds())
	}
	t.Logf("deploy: %.1fs to active; boot to first heartbeat %s after QEMU started (agent started at guest uptime %s)",
		time.Since(start).Seconds(), hb, uptimeAt(vm2, "agent started"))
	// Ironic ends the deploy by asking the agent to power off.
	if err := vm2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var disk string
	for _, d := range m.Disks {
		if d.Serial == target {
			disk = m.DiskPath(d.ID)
		}
	}
	if got := readAt(t, disk, 0, len(img)); !bytes.Equal(got, img) {
		n := 0
		for n < len(img) && got[n] == img[n] {
			n++
		}
		t.Errorf("%s does not hold the image: first difference at byte %d", disk, n)
	}
	for _, d := range m.Disks {
		if d.Serial != target && bytes.Equal(readAt(t, m.DiskPath(d.ID), 0, 64), img[:64]) {
			t.Errorf("the image also went to %s (%s)", d.ID, d.Serial)
		}
	}
}
