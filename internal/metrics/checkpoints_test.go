package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

type fakeFile struct {
	content string
	err     error
}

func (f fakeFile) WriteSnapshot(w io.Writer) (int64, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := io.WriteString(w, f.content)
	return int64(n), err
}

func (fakeFile) Path() string { return "/var/lib/kube-cdc/state.db" }

func TestTheCheckpointFileIsServedToThisMachineOnlyAndOnlyWhole(t *testing.T) {
	m := New()
	m.ServeCheckpointFile("stream", fakeFile{content: "bbolt bytes"})
	m.ServeCheckpointFile("broken", fakeFile{err: errors.New("database not open")})
	h := Mux(m, nil, false)
	for _, c := range []struct {
		remote, path string
		code         int
		body         string
	}{
		{"127.0.0.1:5000", "/checkpoints/stream", 200, "bbolt bytes"},
		{"[::1]:5000", "/checkpoints/stream", 200, "bbolt bytes"},
		{"10.1.2.3:5000", "/checkpoints/stream", 403, ""},
		{"127.0.0.1:5000", "/checkpoints/other", 404, ""},
		{"127.0.0.1:5000", "/checkpoints/broken", 503, ""},
	} {
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		req.RemoteAddr = c.remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code {
			t.Errorf("GET %s from %s: %d, want %d", c.path, c.remote, rec.Code, c.code)
		}
		if c.code == 200 {
			if rec.Body.String() != c.body || rec.Header().Get(CheckpointPathHeader) != "/var/lib/kube-cdc/state.db" {
				t.Errorf("GET %s from %s: %q with path %q", c.path, c.remote, rec.Body.String(), rec.Header().Get(CheckpointPathHeader))
			}
		} else if rec.Header().Get(CheckpointPathHeader) != "" {
			t.Errorf("GET %s from %s: %d names the file", c.path, c.remote, rec.Code)
		}
	}
}
