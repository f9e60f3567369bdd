package rdinit

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/programs"
)

// supervise runs the agent as a child process and, as PID 1 must, reaps
// every orphan. When the agent exits it is restarted (with backoff), or the
// machine is powered off, rebooted or held, as configured.
func supervise(ctx context.Context, log *slog.Logger, cfg Config, console io.Writer, debugPID int, onPanic func(error)) error {
	// The debug login (startDebugLogin) is reaped here like any child:
	// say so, since its logins are then gone.
	other := func(pid int, ws unix.WaitStatus) {
		if pid == debugPID && debugPID != 0 {
			log.Warn("debug login exited: no more debug logins", "pid", pid, "status", describe(ws))
		}
	}
	self, err := os.Executable()
	if err != nil {
		self = "/usr/bin/ironic-agent"
	}
	env := []string{"PATH=" + programs.RamdiskPath, "HOME=/run/ironic-agent", "TERM=linux"}
	backoff := restartBackoffMin
	for {
		t := time.Now()
		argv := agentArgv(cfg)
		pid, err := syscall.ForkExec(self, argv, &syscall.ProcAttr{
			Dir:   "/",
			Env:   env,
			Files: []uintptr{0, 1, 2},
			Sys:   &syscall.SysProcAttr{Setsid: true},
		})
		var status unix.WaitStatus
		if err != nil {
			log.Error("start agent", "argv", strings.Join(argv, " "), "error", err)
		} else {
			log.Info(EventAgentStarted, "pid", pid, "argv", strings.Join(argv, " "), "uptime", logging.Uptime())
			status = reapUntil(pid, other)
			log.Info("agent exited", "argv", strings.Join(argv, " "), "status", describe(status), "seconds", logging.Seconds(time.Since(t)))
		}
		ok := err == nil && status.Exited() && status.ExitStatus() == 0
		if ok && cfg.UploadURL != "" {
			if err := upload(ctx, cfg.UploadDir, cfg.UploadURL, onPanic); err != nil {
				log.Error("upload", "dir", cfg.UploadDir, "url", cfg.UploadURL, "error", err)
			} else {
				log.Info("uploaded", "dir", cfg.UploadDir, "url", cfg.UploadURL)
			}
		}
		switch cfg.Exit {
		case exitRestart:
			if time.Since(t) > restartBackoffMax {
				backoff = restartBackoffMin
			}
			log.Info("restarting agent", "after", backoff.String())
			time.Sleep(backoff)
			backoff = min(2*backoff, restartBackoffMax)
			continue
		case exitHold:
			log.Info("holding: the machine stays up")
			for {
				reapUntil(-1, other)
				time.Sleep(time.Second)
			}
		}
		return Halt(cfg.Exit == exitReboot)
	}
}

// reapUntil waits for children until pid exits (pid -1: until there are no
// children left), collecting orphans on the way and telling other of
// each.
func reapUntil(pid int, other func(pid int, ws unix.WaitStatus)) unix.WaitStatus {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ws // ECHILD: nothing left to wait for
		}
		if got == pid {
			return ws
		}
		other(got, ws)
	}
}

func describe(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("status %#x", uint32(ws))
}

// Halt syncs the disks, lets the serial console drain so the last lines
// reach whoever records it, and powers off (or reboots).
func Halt(reboot bool) error {
	unix.Sync()
	// TCSBRK with a non-zero argument is tcdrain(): wait until the UART
	// has sent everything.
	_ = unix.IoctlSetInt(1, unix.TCSBRK, 1)
	cmd := unix.LINUX_REBOOT_CMD_POWER_OFF
	if reboot {
		cmd = unix.LINUX_REBOOT_CMD_RESTART
	}
	return unix.Reboot(cmd)
}

// upload POSTs dir as a gzip'ed tar (symlinks kept as links) to url.
func upload(ctx context.Context, dir, url string, onPanic func(error)) error {
	pr, pw := io.Pipe()
	go func() {
		defer Recover(onPanic)
		pw.CloseWithError(writeTarGz(pw, dir))
	}()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/gzip")
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func writeTarGz(w io.Writer, dir string) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
