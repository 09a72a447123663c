package checkpoint

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

var configmaps = change.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}

func keyIndex(t *testing.T, s Store, sink string, res change.Resource) map[string]change.Entry {
	t.Helper()
	got := map[string]change.Entry{}
	if err := s.KeyIndex(context.Background(), sink, res, func(k change.Key, e change.Entry) error {
		got[k.String()] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func upsert(ns, name, uid string, rv change.RV) change.Change {
	return change.Change{Resource: configmaps, Key: change.Key{Namespace: ns, Name: name}, UID: uid, RV: rv, Op: change.OpUpdate}
}

func del(ns, name, uid string, rv change.RV) change.Change {
	c := upsert(ns, name, uid, rv)
	c.Op = change.OpDelete
	return c
}

const uidA = "3f1e0b0c-5a53-4c4e-9b1f-0d6b2f6f9a01"

func TestFileStoreCommitsCheckpointAndKeyIndexTogetherAndKeepsThemAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rv, err := f.Load(ctx, "s", configmaps); err != nil || rv != 0 {
		t.Fatalf("fresh Load = %v, %v; want 0", rv, err)
	}
	b := change.Batch{Resource: configmaps, Checkpoint: 12, Changes: []change.Change{
		upsert("ns", "a", uidA, 10),
		upsert("ns", "b", "not-a-uuid", 11),
		upsert("", "node-1", "u3", 12),
	}}
	if err := f.Commit(ctx, "s", b); err != nil {
		t.Fatal(err)
	}
	want := map[string]change.Entry{
		"ns/a":   {UID: uidA, RV: 10},
		"ns/b":   {UID: "not-a-uuid", RV: 11},
		"node-1": {UID: "u3", RV: 12},
	}
	check := func(s Store, wantRV change.RV, want map[string]change.Entry) {
		t.Helper()
		if rv, err := s.Load(ctx, "s", configmaps); err != nil || rv != wantRV {
			t.Errorf("Load = %v, %v; want %v", rv, err, wantRV)
		}
		got := keyIndex(t, s, "s", configmaps)
		if len(got) != len(want) {
			t.Errorf("key index %v, want %v", got, want)
		}
		for k, e := range want {
			if got[k] != e {
				t.Errorf("key %s: %+v, want %+v", k, got[k], e)
			}
		}
	}
	check(f, 12, want)

	// Another sink is separate; another scope of the same resource has its own
	// checkpoint, and its relists see every scope's keys (as the PostgreSQL sink's
	// objects table shows them), so the sweeping relist can tombstone what a removed
	// scope left.
	if rv, _ := f.Load(ctx, "other", configmaps); rv != 0 {
		t.Errorf("other sink sees checkpoint %v", rv)
	}
	if got := keyIndex(t, f, "other", configmaps); len(got) != 0 {
		t.Errorf("other sink sees keys %v", got)
	}
	scoped := configmaps
	scoped.Scope = "abc"
	if rv, _ := f.Load(ctx, "s", scoped); rv != 0 {
		t.Errorf("other scope sees checkpoint %v", rv)
	}
	if got := keyIndex(t, f, "s", scoped); len(got) != len(want) {
		t.Errorf("other scope sees keys %v, want every scope's %v", got, want)
	}

	if err := f.Commit(ctx, "s", change.Batch{Resource: configmaps, Checkpoint: 20, Changes: []change.Change{
		del("ns", "b", "not-a-uuid", 19),
		upsert("ns", "a", uidA, 20),
	}}); err != nil {
		t.Fatal(err)
	}
	want = map[string]change.Entry{"ns/a": {UID: uidA, RV: 20}, "node-1": {UID: "u3", RV: 12}}
	check(f, 20, want)

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check(f, 20, want)
}

func TestFileStoreCheckpointNeverMovesBackwardsAndReplaysDoNotUndoNewerKeys(t *testing.T) {
	ctx := context.Background()
	f, err := OpenFile(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Commit(ctx, "s", change.Batch{Resource: configmaps, Checkpoint: 50, Changes: []change.Change{upsert("ns", "a", uidA, 50)}}); err != nil {
		t.Fatal(err)
	}
	// A replay of an older batch.
	if err := f.Commit(ctx, "s", change.Batch{Resource: configmaps, Checkpoint: 30, Changes: []change.Change{
		upsert("ns", "a", uidA, 30), del("ns", "a", uidA, 31),
	}}); err != nil {
		t.Fatal(err)
	}
	if rv, _ := f.Load(ctx, "s", configmaps); rv != 50 {
		t.Errorf("checkpoint moved to %v, want it to stay at 50", rv)
	}
	if got := keyIndex(t, f, "s", configmaps); got["ns/a"] != (change.Entry{UID: uidA, RV: 50}) {
		t.Errorf("key index after replay: %v", got)
	}
}

func TestOpenChoosesTheStoreByTypeAndNamesTheKeyOfAnUnknownOrEmptyType(t *testing.T) {
	s, err := Open(Options{Type: "file", Path: filepath.Join(t.TempDir(), "x.db")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*File); !ok {
		t.Errorf("type file opened %T", s)
	}
	s.Close()
	if s, err := Open(Options{Type: "none"}); err != nil || s != (None{}) {
		t.Errorf("type none: %v, %v", s, err)
	}
	for _, typ := range []string{"kafka", "redis", ""} {
		_, err = Open(Options{Type: typ})
		if err == nil || !strings.Contains(err.Error(), "checkpoint.type") || !strings.Contains(err.Error(), `"`+typ+`"`) && typ != "" {
			t.Errorf("type %q: error %v, want one naming checkpoint.type and the value", typ, err)
		}
	}
}

func TestEntryEncodingRoundTripsAndIsCompact(t *testing.T) {
	for _, e := range []change.Entry{{UID: uidA, RV: 1}, {UID: "X", RV: 1 << 62}, {UID: "", RV: 0}, {UID: strings.ToUpper(uidA), RV: 7}} {
		b := encodeEntry(nil, e)
		got, err := decodeEntry(b)
		if err != nil || got != e {
			t.Errorf("round trip of %+v = %+v, %v", e, got, err)
		}
	}
	if n := len(encodeEntry(nil, change.Entry{UID: uidA, RV: 123456789})); n > 21 {
		t.Errorf("a UUID entry takes %d bytes", n)
	}
}

func TestFileStoreIntendHoldsUnknownKeysAtRVZeroUntilCommittedAndLeavesHeldKeysAlone(t *testing.T) {
	ctx := context.Background()
	f, err := OpenFile(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const uidB = "3f1e0b0c-5a53-4c4e-9b1f-0d6b2f6f9a02"
	if err := f.Commit(ctx, "s", change.Batch{Resource: configmaps, Changes: []change.Change{upsert("ns", "a", uidA, 5)}, Checkpoint: 5}); err != nil {
		t.Fatal(err)
	}
	// The next batch: a's update, b's create, and c's delete (a delete adds nothing).
	b := change.Batch{Resource: configmaps, Changes: []change.Change{upsert("ns", "a", uidA, 7), upsert("ns", "b", uidB, 8), del("ns", "c", uidB, 9)}, Checkpoint: 9}
	if err := Intend(ctx, f, "s", b); err != nil {
		t.Fatal(err)
	}
	// Killed here, after the records went out: the index holds b, at no version it
	// could list, and a at the version committed before.
	got := keyIndex(t, f, "s", configmaps)
	want := map[string]change.Entry{"ns/a": {UID: uidA, RV: 5}, "ns/b": {UID: uidB}}
	if len(got) != len(want) || got["ns/a"] != want["ns/a"] || got["ns/b"] != want["ns/b"] {
		t.Errorf("key index after Intend = %v, want %v", got, want)
	}
	if ck, err := f.Load(ctx, "s", configmaps); err != nil || ck != 5 {
		t.Errorf("checkpoint after Intend = %d (%v), want 5: Intend must not move it", ck, err)
	}
	if err := f.Commit(ctx, "s", b); err != nil {
		t.Fatal(err)
	}
	if got := keyIndex(t, f, "s", configmaps); got["ns/b"] != (change.Entry{UID: uidB, RV: 8}) || got["ns/a"] != (change.Entry{UID: uidA, RV: 7}) {
		t.Errorf("key index after Commit = %v", got)
	}
}
