package vm

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/metric"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// fipsModeLine is what the agent logs once it runs in Go's FIPS 140-3
// mode (cmd/ironic-agent run), with the kernel's own state.
const fipsModeLine = "FIPS 140-3 mode"

// TestVMDeployFIPSBIOS deploys one node through Ironic three times, its
// ramdisk booted with fips=1 as Metal3's ironic-image boots it from a host
// in FIPS mode, each deploy with one kind of checksum only:
//   - SHA-256 (os_hash_algo): TestVMDeployThroughputBIOS's 96 MiB image,
//     with fetch_direct before write_image in the same VM: the agent's
//     write throughput in FIPS mode (the standard library's SHA-256, no
//     AVX2 under QEMU's qemu64 CPU), the performance page's figure beside
//     TestVMDeployThroughputBIOS's of the same image without fips=1;
//   - SHA-512 (os_hash_algo, Glance's default): its write throughput too,
//     beside the same;
//   - MD5 only (image_checksum): the deploy fails, and Ironic's last_error
//     says FIPS mode is why.
//
// Each boot's kernel runs in its FIPS mode and the agent in Go's with the
// certified module (GOFIPS140, internal/ramdisk.BuildAgent), and the
// disk holds the image after each completed deploy. Ironic clears
// instance_info at undeploy; each deploy sets it anew. Every series passes
// an MD5 checksum on to the agent ([agent]allow_md5_checksum only tells it
// whether MD5 is permitted).
func TestVMDeployFIPSBIOS(t *testing.T) {
	slowScenario(t)
	seriesIndependent(t) // the checksums are the agent's to check, whatever the series
	img := make([]byte, 96<<20)
	_, _ = rand.NewChaCha8([32]byte{'v', 'm', 't'}).Read(img)
	copy(img[:512], mbrImage())
	bctx, bcancel := context.WithTimeout(t.Context(), 15*time.Minute)
	rd := fetchDirectRamdisk(t, bctx)
	bcancel()
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	c := deployCase{firmware: "bios", macs: newMACs(t), port: newAgentPort(t),
		props: map[string]any{"capabilities": "boot_mode:bios"}, management: "noop", image: img}
	m := serviceMachine(t, rd, c.firmware, c.port, c.macs)
	m.Append = agentArgs(c.port) + " ironic_agent.dhcp=" + c.macs[0] + " fips=1"
	node, served := availableForDeploy(t, ctx, s, c, &m)
	var source string
	for _, op := range served {
		if o, ok := op.(nodes.UpdateOperation); ok && o.Path == "/instance_info/image_source" {
			source, _ = o.Value.(string)
		}
	}
	l := kernelLifecycle(t, ctx, s.ironic, node.UUID, m)
	disk := ""
	for _, d := range m.Disks {
		if d.Serial == deployTarget {
			disk = m.DiskPath(d.ID)
		}
	}
	s256, s512, m5 := sha256.Sum256(img), sha512.Sum512(img), md5.Sum(img)
	setSums := func(sums map[string]any) {
		t.Helper()
		info := map[string]any{"image_source": source, "image_disk_format": "raw", "root_gb": "0"}
		for k, v := range sums {
			info[k] = v
		}
		if err := nodes.Update(ctx, s.ironic.Service, node.UUID, nodes.UpdateOpts{
			nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info", Value: info},
		}).Err; err != nil {
			t.Fatal(err)
		}
	}
	checkFIPS := func(vm *qemu.VM) {
		t.Helper()
		l, ok := vm.Find(fipsModeLine)
		if !ok {
			t.Fatalf("the agent never said it runs in FIPS mode")
		}
		if !strings.Contains(l.Text, "kernel_fips_enabled=1") || !strings.Contains(l.Text, "module=v1.0.0") {
			t.Errorf("the kernel is not in FIPS mode, or the agent does not run the certified module v1.0.0: %s", l.Text)
		}
	}
	deploy := func(what string, sums map[string]any, steps ...nodes.DeployStep) *qemu.VM {
		t.Helper()
		setSums(sums)
		st := l.Deploy(6*time.Minute, steps...)
		checkFIPS(st.VM)
		if _, ok := st.VM.Find("crypto (FIPS 140-3 mode)"); !ok {
			t.Errorf("%s: the write's stage times do not name the standard library's FIPS module", what)
		}
		if err := st.VM.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(readAt(t, disk, 0, len(img)), img) {
			t.Errorf("%s: %s does not hold the image", what, disk)
		}
		reportSeconds(t, st.Took, what, "deploy_s")
		l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, 2*time.Minute)
		return st.VM
	}

	// The fetch_direct step's arguments come from the served image's node
	// updates, as TestVMDeployThroughputBIOS's do.
	vm := deploy("sha256", map[string]any{"image_os_hash_algo": "sha256", "image_os_hash_value": hex.EncodeToString(s256[:])},
		fetchDirectStep(t, served))
	if dd, ok := consoleRate(vm, fetchDirectLine); ok {
		reportValue(t, dd, "MB/s", "fetch_direct_mb_s")
	} else {
		t.Errorf("the SHA-256 deploy's console has no fetch_direct line (%s)", fetchDirectLine)
	}
	reportFIPSWrite(t, vm, "write_image_mb_s")
	vm = deploy("sha512", map[string]any{"image_os_hash_algo": "sha512", "image_os_hash_value": hex.EncodeToString(s512[:])})
	reportFIPSWrite(t, vm, "write_image_sha512_mb_s")

	setSums(map[string]any{"image_checksum": hex.EncodeToString(m5[:])})
	vm = l.Start(nodes.ProvisionStateOpts{Target: nodes.TargetActive})
	n, err := s.ironic.WaitState(ctx, node.UUID, "deploy failed", 6*time.Minute)
	if n == nil || n.ProvisionState != "deploy failed" {
		t.Fatalf("an MD5-only image in FIPS mode: %v", err)
	}
	checkFIPS(vm)
	if !strings.Contains(n.LastError, "MD5 is not allowed in FIPS mode") {
		t.Errorf("last_error = %q, want the agent's refusal naming FIPS mode", n.LastError)
	}
	t.Logf("MD5-only image in FIPS mode: deploy failed: %s", n.LastError)
	l.Stop()
}

// reportFIPSWrite reports the agent's write of the image in vm, in FIPS
// mode, beside TestVMDeployThroughputBIOS's write of the same image on the
// same VM and disk without fips=1, measured in the same run.
func reportFIPSWrite(t *testing.T, vm *qemu.VM, figure string) {
	t.Helper()
	v, ok := writeRate(vm)
	if !ok {
		t.Errorf("%s: the console has no image written line (%s)", figure, imageWrittenLine)
		return
	}
	metric.Report(t, metricName(t, figure), v, "MB/s", metric.LimitFrom(metric.Name("vm", "DeployThroughputBIOS", "write_image_mb_s")))
}
