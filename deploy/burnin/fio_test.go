package burnin

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
)

// fioNetwork is the fio command line IPA's _do_fio_network runs.
func fioNetwork(ctx context.Context, writer bool, port int, runtime string) *exec.Cmd {
	// --thread keeps fio's jobs in its one process (IPA's command line
	// forks one per job, each in its own session), so the test can end them.
	args := []string{"--thread", "--ioengine", "net", "--port", strconv.Itoa(port), "--fill_device", "1", "--group_reporting", "--gtod_reduce", "1", "--numjobs", "16"}
	if writer {
		args = append(args, "--name", "writer", "--rw", "write", "--runtime", runtime, "--time_based", "--listen")
	} else {
		args = append(args, "--name", "reader", "--rw", "read", "--hostname", "127.0.0.1")
	}
	cmd := exec.CommandContext(ctx, "fio", args...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// burnin_network's partner may be a node running IPA, that is fio: each
// side of ours against fio's, with IPA's command lines.
func TestNetworkAgainstFio(t *testing.T) {
	if _, err := exec.LookPath("fio"); err != nil {
		t.Skip("SKIPPED: needs fio (./test.sh installs it): the partner IPA would run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := NetworkOptions{Partner: "127.0.0.1", Listen: "127.0.0.1", Jobs: 16, Runtime: time.Second, ReaderRetry: 100 * time.Millisecond}

	// fio writes, we read (our reader retries until fio listens).
	opts.Port = netnstest.FreeTCPPorts(t, 16)
	fio := fioNetwork(ctx, true, opts.Port, "1")
	if err := fio.Start(); err != nil {
		t.Fatal(err)
	}
	d, err := netRead(ctx, opts, nil)
	if werr := fio.Wait(); werr != nil || err != nil || d.Bytes == 0 || d.Connections != 16 {
		t.Errorf("fio writer, our reader: %+v %v; fio: %v", d, err, werr)
	}
	t.Logf("from fio: %d bytes in %.1f s", d.Bytes, d.Seconds)

	// We write, fio reads until we close.
	opts.Port = netnstest.FreeTCPPorts(t, 16)
	type result struct {
		d   NetworkDirection
		err error
	}
	done := make(chan result, 1)
	listening := make(chan struct{})
	go func() {
		d, err := netWrite(ctx, opts, func() { close(listening) })
		done <- result{d, err}
	}()
	// fio's reader does not retry: it starts once every port listens.
	select {
	case <-listening:
	case r := <-done:
		t.Fatalf("our writer ended before it listened: %+v %v", r.d, r.err)
	}
	out, ferr := fioNetwork(ctx, false, opts.Port, "").CombinedOutput()
	r := <-done
	if ferr != nil || r.err != nil || r.d.Bytes == 0 || r.d.Connections != 16 {
		t.Errorf("our writer, fio reader: %+v %v; fio: %v\n%s", r.d, r.err, ferr, out)
	}
	t.Logf("to fio: %d bytes in %.1f s", r.d.Bytes, r.d.Seconds)
}
