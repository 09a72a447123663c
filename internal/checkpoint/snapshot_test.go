package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

func TestAReaderBesideTheWriterIsRefusedAtOnceAndReadsTheWritersCopyInstead(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	w, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := change.Batch{Resource: configmaps, Checkpoint: 12, Changes: []change.Change{
		upsert("ns", "a", uidA, 10), upsert("ns", "b", "u2", 12)}}
	if err := w.Commit(ctx, "s", b); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	_, err = OpenFileReadOnly(path)
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("OpenFileReadOnly beside the writer: %v, want ErrHeld", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("OpenFileReadOnly beside the writer took %v: it must not wait for the writer", took)
	}
	if d, err := CheckFile(path); err != nil || !strings.Contains(d, "in use by a running kube-cdc") {
		t.Errorf("CheckFile beside the writer: %q, %v; want ok, in use", d, err)
	}

	var copied bytes.Buffer
	if _, err := w.WriteSnapshot(&copied); err != nil {
		t.Fatal(err)
	}
	// The writer goes on while the copy is read.
	if err := w.Commit(ctx, "s", change.Batch{Resource: configmaps, Checkpoint: 13, Changes: []change.Change{upsert("ns", "c", "u3", 13)}}); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, copied.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenFileReadOnly(cp)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rv, err := r.Load(ctx, "s", configmaps); err != nil || rv != 12 {
		t.Errorf("the copy's checkpoint: %v, %v; want 12", rv, err)
	}
	want := map[string]change.Entry{"ns/a": {UID: uidA, RV: 10}, "ns/b": {UID: "u2", RV: 12}}
	if got := keyIndex(t, r, "s", configmaps); !maps.Equal(got, want) {
		t.Errorf("the copy's key index %v, want %v", got, want)
	}
	if err := r.Commit(ctx, "s", b); err == nil {
		t.Error("a read-only file took a Commit")
	}
	if p, _ := filepath.Abs(path); w.Path() != p {
		t.Errorf("Path() = %s, want %s", w.Path(), p)
	}
}

func TestAReaderOpensTheFileOnceTheWriterClosedItAndNeverCreatesOne(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.db")
	if _, err := OpenFileReadOnly(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenFileReadOnly of a missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenFileReadOnly created %s", missing)
	}
	if d, err := CheckFile(missing); err != nil || !strings.Contains(d, "does not exist yet") {
		t.Errorf("CheckFile of a missing file in a writable directory: %q, %v", d, err)
	}
	path := filepath.Join(dir, "state.db")
	w, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, "s", change.Batch{Resource: configmaps, Checkpoint: 7, Changes: []change.Change{upsert("ns", "a", uidA, 7)}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenFileReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	if rv, err := r.Load(ctx, "s", configmaps); err != nil || rv != 7 {
		t.Errorf("Load = %v, %v; want 7", rv, err)
	}
	// Two readers at once share the file.
	r2, err := OpenFileReadOnly(path)
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	r2.Close()
	r.Close()
	if d, err := CheckFile(path); err != nil || d != "checkpoint file "+path {
		t.Errorf("CheckFile of a closed file: %q, %v", d, err)
	}
}
