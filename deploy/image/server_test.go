package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// imageServer is a real HTTP server for image tests. It serves files with
// http.ServeContent (Range, If-Range, Last-Modified, ETag) and can misbehave
// on purpose: cut the connection at a byte, stall at a byte, corrupt a
// byte, or answer with a fixed status.
type imageServer struct {
	t    testing.TB
	srv  *http.Server
	base string

	mu    sync.Mutex
	files map[string]*servedFile

	requests atomic.Int64
	ranges   atomic.Int64 // requests carrying a Range header
}

type servedFile struct {
	data    []byte
	modTime time.Time
	etag    string
	noRange bool // ignore Range (answer 200 with everything)
	status  int  // answer this status instead of the file

	// Faults applied to the next faultCount GETs of the whole file or a
	// range: cutAt closes the connection after that many body bytes;
	// stallAt stops sending for stallFor at that body byte (offsets count
	// from the start of each reply body).
	faultCount int
	cutAt      int64
	stallAt    int64
	stallFor   time.Duration
	// onCut, if set, changes the file right after the first cut (once),
	// before the client can come back.
	onCut func(*servedFile)
}

// listenInRange listens on the first free port of [lo, hi): each test
// area has its own range on the shared machine.
func listenInRange(t testing.TB, lo, hi int) net.Listener {
	t.Helper()
	for p := lo; p < hi; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			return l
		}
	}
	t.Fatalf("no free port in %d-%d", lo, hi-1)
	return nil
}

// newImageServer serves image tests on ports 9300-9399.
func newImageServer(t testing.TB) *imageServer {
	return newImageServerOn(t, 9300, 9400)
}

func newImageServerOn(t testing.TB, lo, hi int) *imageServer {
	t.Helper()
	s := &imageServer{t: t, files: map[string]*servedFile{}}
	l := listenInRange(t, lo, hi)
	s.base = "http://" + l.Addr().String()
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.srv.Shutdown(ctx)
		s.srv.Close()
	})
	return s
}

// put serves data at /name and returns its URL.
func (s *imageServer) put(name string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[name] = &servedFile{data: data, modTime: time.Unix(1700000000, 0), etag: fmt.Sprintf("%q", fmt.Sprintf("v1-%d", len(data)))}
	return s.base + "/" + name
}

// set changes a served file under the lock.
func (s *imageServer) set(name string, f func(*servedFile)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.files[name])
}

func (s *imageServer) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.Header.Get("Range") != "" {
		s.ranges.Add(1)
	}
	s.mu.Lock()
	f, ok := s.files[r.URL.Path[1:]]
	var sf servedFile
	if ok {
		sf = *f
		if f.faultCount > 0 {
			f.faultCount--
		} else {
			sf.cutAt, sf.stallAt = -1, -1
		}
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if sf.status != 0 {
		http.Error(w, http.StatusText(sf.status), sf.status)
		return
	}
	if sf.noRange {
		r.Header.Del("Range")
	}
	if sf.etag != "" {
		w.Header().Set("ETag", sf.etag)
	}
	fw := &faultWriter{ResponseWriter: w, cutAt: sf.cutAt, stallAt: sf.stallAt, stallFor: sf.stallFor, ctx: r.Context()}
	http.ServeContent(fw, r, "", sf.modTime, bytes.NewReader(sf.data))
	if fw.cut {
		s.mu.Lock()
		if f.onCut != nil {
			f.onCut(f)
			f.onCut = nil
		}
		s.mu.Unlock()
		// Abort the response so the client sees a broken transfer.
		panic(http.ErrAbortHandler)
	}
}

// faultWriter cuts or stalls a response body at a byte.
type faultWriter struct {
	http.ResponseWriter
	ctx      context.Context
	n        int64
	cutAt    int64
	stallAt  int64
	stallFor time.Duration
	cut      bool
}

func (f *faultWriter) Write(p []byte) (int, error) {
	if f.cut {
		return 0, errors.New("cut")
	}
	if f.stallAt >= 0 && f.n <= f.stallAt && f.stallAt < f.n+int64(len(p)) {
		k := f.stallAt - f.n
		m, err := f.ResponseWriter.Write(p[:k])
		f.n += int64(m)
		if err != nil {
			return m, err
		}
		if fl, ok := f.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
		select {
		case <-time.After(f.stallFor):
		case <-f.ctx.Done():
			return m, f.ctx.Err()
		}
		f.stallAt = -1
		n, err := f.Write(p[k:])
		return m + n, err
	}
	if f.cutAt >= 0 && f.n+int64(len(p)) > f.cutAt {
		k := f.cutAt - f.n
		m, _ := f.ResponseWriter.Write(p[:k])
		f.n += int64(m)
		if fl, ok := f.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
		f.cut = true
		return m, errors.New("cut")
	}
	m, err := f.ResponseWriter.Write(p)
	f.n += int64(m)
	return m, err
}
