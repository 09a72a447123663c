package audit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// posStore is an in-memory PositionStore that counts how often each audit ID is stored.
type posStore struct {
	mu     sync.Mutex
	pos    map[string]Position
	stored map[string]int
}

func (s *posStore) Position(_ context.Context, path string) (Position, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos[path], nil
}

func (s *posStore) StoreAt(_ context.Context, events []Event, path string, pos Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range events {
		s.stored[e.AuditID]++
	}
	s.pos[path] = pos
	return nil
}

func (s *posStore) ids() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.stored {
		out[k] = v
	}
	return out
}

func logLine(id, verb string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"` + id + `","stage":"ResponseComplete",` +
		`"requestURI":"/api/v1/namespaces/a/configmaps/c","verb":"` + verb + `","user":{"username":"dev-a"},` +
		`"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},"responseStatus":{"metadata":{},"code":200},` +
		`"requestReceivedTimestamp":"2026-11-27T05:00:00.000001Z","stageTimestamp":"2026-11-27T05:00:00.000002Z"}` + "\n"
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestALogFileIsFollowedAcrossRotationAndARestartStoringEachEventOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	store := &posStore{pos: map[string]Position{}, stored: map[string]int{}}
	follow := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- (&LogFile{Path: path, Store: store, Poll: 10 * time.Millisecond, BatchLines: 2}).Run(ctx)
		}()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	waitFor := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := store.ids()
			ok := len(got) == len(want)
			for _, id := range want {
				ok = ok && got[id] == 1
			}
			for id, n := range got {
				if n != 1 {
					t.Fatalf("event %s stored %d times", id, n)
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("stored %v, want each of %v once", got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	stop := follow() // the file does not exist yet: waited for
	partial := logLine("e3", "update")
	appendTo(t, path, logLine("e1", "create")+logLine("r1", "get")+"{not json\n"+logLine("e2", "patch")+partial[:40])
	waitFor("e1", "e2")
	appendTo(t, path, partial[40:]+logLine("e4", "delete"))
	waitFor("e1", "e2", "e3", "e4")

	// Rotated: renamed, the last lines written to it after the rename, a new file begun.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path+".1", logLine("e5", "update"))
	appendTo(t, path, logLine("e6", "update"))
	waitFor("e1", "e2", "e3", "e4", "e5", "e6")
	stop()

	// Restarted: resumes after what was stored; rotated again while it was not running.
	appendTo(t, path, logLine("e7", "update"))
	if err := os.Rename(path, path+".2"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path, logLine("e8-a-longer-audit-id", "create"))
	stop = follow()
	waitFor("e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8-a-longer-audit-id")

	// Truncated (copytruncate): read again from the start. Noticed when the file is
	// shorter than the position, as by every follower of a copytruncate rotation.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path, logLine("e9", "update"))
	waitFor("e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8-a-longer-audit-id", "e9")
	stop()
	if s := fmt.Sprint(store.ids()); strings.Contains(s, ":2") {
		t.Errorf("stored twice: %s", s)
	}
}
