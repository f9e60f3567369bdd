package agent

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/ironic-go/ironic-agent/agent/agenttls"
)

// Per-node state kept in /run (tmpfs: gone at reboot) so that an agent
// process restarted during an operation can carry on. Ironic hands the
// token out once per operation (a later lookup gets "******") and rejects a
// heartbeat whose agent_verify_ca changed, so a restarted IPA is locked out
// until the node is rebooted; keeping the token and the auto-TLS
// certificate of this boot lets the new process continue where the old one
// stopped. A reboot (where Ironic issues a fresh token) starts clean.

// nodeStateDir is <state_dir>/<node uuid>; the UUID comes from Ironic and
// is checked before it names a directory: only the plain forms (36
// characters with dashes, or 32 hex digits) are taken, not uuid.Parse's
// braced or urn: ones.
func (a *Agent) nodeStateDir(nodeUUID string) (string, error) {
	if _, err := uuid.Parse(nodeUUID); err != nil || (len(nodeUUID) != 36 && len(nodeUUID) != 32) {
		return "", fmt.Errorf("node uuid %q is not a UUID", nodeUUID)
	}
	if a.cfg == nil || a.cfg.StateDir == "" {
		return "", errors.New("no state directory")
	}
	return filepath.Join(a.cfg.StateDir, nodeUUID), nil
}

// saveToken keeps the token of this boot for the node.
func (a *Agent) saveToken(uuid, token string) {
	dir, err := a.nodeStateDir(uuid)
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "agent-token"), []byte(token), 0o600)
	}
	if err == nil {
		// A fresh token starts a new operation: nothing of an earlier one
		// is still running.
		if rerr := os.Remove(filepath.Join(dir, runningStepFile)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
	}
	if err != nil {
		a.log.Warn("cannot keep the agent token for a restart", "error", err)
	}
}

// loadToken returns the token an earlier process of this boot kept.
func (a *Agent) loadToken(uuid string) string {
	dir, err := a.nodeStateDir(uuid)
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(dir, "agent-token"))
	if err != nil || len(b) < 32 {
		return ""
	}
	return string(b)
}

// autoTLSCertificate returns the self-signed certificate for ip: the one an
// earlier process of this boot made for the same node and address while it
// is still valid, else a new one, which is then kept.
func (a *Agent) autoTLSCertificate(uuid string, ip net.IP) (*agenttls.SelfSigned, error) {
	dir, derr := a.nodeStateDir(uuid)
	if derr == nil {
		if s, err := loadCertificate(dir, ip); err == nil {
			a.log.Info("automatic TLS: reusing this boot's certificate", "ip", ip.String())
			return s, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("automatic TLS: not reusing the kept certificate", "error", err)
		}
	}
	hn, _ := os.Hostname()
	curve, err := agenttls.ParseCurve(a.cfg.TLSCertificateCurve)
	if err != nil {
		return nil, err
	}
	s, err := agenttls.GenerateSelfSigned(ip, hn, curve, time.Now(), a.cfg.AutoTLSAllowedClockSkew)
	if err != nil {
		return nil, err
	}
	if derr == nil {
		err = os.MkdirAll(dir, 0o700)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "agent.key"), s.KeyPEM, 0o600)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "agent.crt"), s.CertPEM, 0o644)
		}
		if err != nil {
			a.log.Warn("automatic TLS: cannot keep the certificate for a restart", "error", err)
		}
	}
	a.log.Info("automatic TLS: generated a self-signed certificate", "ip", ip.String())
	return s, nil
}

func loadCertificate(dir string, ip net.IP) (*agenttls.SelfSigned, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "agent.crt"))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "agent.key"))
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(ip) {
		return nil, fmt.Errorf("kept certificate is for %v, not %s", leaf.IPAddresses, ip)
	}
	if time.Now().Add(time.Hour).After(leaf.NotAfter) {
		return nil, fmt.Errorf("kept certificate expires %s", leaf.NotAfter)
	}
	return &agenttls.SelfSigned{CertPEM: certPEM, KeyPEM: keyPEM, Cert: pair}, nil
}

// runningStep is what runningStepFile holds while a clean or deploy step
// runs.
type runningStep struct {
	Kind string `json:"kind"`
	Step string `json:"step"`
}

const runningStepFile = "running-step"

// markStepRunning records, for a restarted process, that this one started
// kind's step; the returned func clears the record when the step ends.
// Without it a process killed mid-step would look to Ironic like a fresh
// agent (empty command list), which Ironic takes as "the step is done" and
// skips: an interrupted erase would count as erased, an interrupted
// write_image as written.
func (a *Agent) markStepRunning(kind, step string) func() {
	a.mu.Lock()
	uuid := a.nodeUUID
	a.mu.Unlock()
	dir, err := a.nodeStateDir(uuid)
	if err != nil {
		return func() {}
	}
	b, _ := json.Marshal(runningStep{Kind: kind, Step: step})
	path := filepath.Join(dir, runningStepFile)
	err = os.MkdirAll(dir, 0o700)
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		a.log.Warn("cannot record the running step for a restart", "error", err)
		return func() {}
	}
	return func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("cannot clear the running-step record", "error", err)
		}
	}
}

// reportInterruptedStep turns the step an earlier process of this boot was
// running when it died into a FAILED execute_<kind>_step result, so Ironic
// fails the step rather than skipping it.
func (a *Agent) reportInterruptedStep(uuid string) {
	dir, err := a.nodeStateDir(uuid)
	if err != nil || a.exec == nil {
		return
	}
	path := filepath.Join(dir, runningStepFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var rs runningStep
	if err := json.Unmarshal(b, &rs); err != nil || (rs.Kind != "clean" && rs.Kind != "deploy" && rs.Kind != "service") {
		a.log.Warn("ignoring a garbled running-step record", "path", path)
		_ = os.Remove(path)
		return
	}
	msg := fmt.Sprintf("the agent process was restarted while it ran %s step %s; the step's outcome is unknown", rs.Kind, rs.Step)
	a.exec.RecordFailed("execute_"+rs.Kind+"_step", stepError(rs.Kind, msg))
	a.log.Error(EventUnfinishedStepFailed, "kind", rs.Kind, "step", rs.Step)
	_ = os.Remove(path)
}
