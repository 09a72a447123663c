package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/utils/clock"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// File is the file store: one bbolt database holding, per (sink, resource, scope), the
// checkpoint and the key index. The layout is
//
//	sinks/<sink>/<resource id>\x00<scope>/checkpoint   → RV, 8 bytes big endian
//	sinks/<sink>/<resource id>\x00<scope>/epoch        → the checkpoint's epoch, 4 bytes big endian (absent: 0)
//	sinks/<sink>/<resource id>\x00<scope>/keys/<key>   → entry (see encodeEntry)
//
// Every write of the file is one bbolt transaction, so the key index and the checkpoint
// move together, and a crash leaves the previous write intact. Without a flush interval
// each Commit is one write; with one (FileOptions.FlushInterval, GroupCommitStore) the
// Commits of an interval are written together (pending.go).
type File struct {
	db       *bolt.DB
	interval time.Duration              // FileOptions.FlushInterval
	clock    clock.WithDelayedExecution // FileOptions.Clock: times the flush interval

	// flushMu orders the writes of the file (flushes, intents, forgotten scopes): one at a
	// time, each carrying every Commit made before it began.
	flushMu sync.Mutex

	mu       sync.Mutex
	pending  *overlay    // Commits not yet being written; never nil
	flushing *overlay    // the Commits the write holding flushMu is writing; nil when none
	timer    clock.Timer // the flush due for pending; nil when none is
	flushErr error       // the last flush's error, until one succeeds
	closed   bool
}

// FileOptions configure a File.
type FileOptions struct {
	// FlushInterval groups commits: Commit applies a batch in memory and returns, and every
	// batch committed within FlushInterval of the first one not yet written goes to the file
	// in one transaction (one pair of fdatasyncs instead of one per batch). Reads see each
	// Commit at once. A crash loses at most the last interval's Commits: whole batches, in
	// order (never a later batch without an earlier one), so the sink re-emits their
	// records, which at-least-once delivery allows. Intend stays durable before it returns,
	// and Close writes what is pending. 0, the default: every Commit is durable when it
	// returns.
	FlushInterval time.Duration
	// Clock times FlushInterval; default the real clock. Tests pass a fake one
	// (k8s.io/utils/clock/testing) and step it to the flush.
	Clock clock.WithDelayedExecution
}

// withDefaults fills FileOptions' defaults.
func (o FileOptions) withDefaults() FileOptions {
	o.FlushInterval = max(o.FlushInterval, 0)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

var (
	bucketSinks   = []byte("sinks")
	bucketKeys    = []byte("keys")
	keyCheckpoint = []byte("checkpoint")
	keyEpoch      = []byte("epoch")

	errClosed = errors.New("checkpoint file closed")
)

// OpenFile opens (creating if needed) the bbolt file at path, every Commit durable when it
// returns. A second process holding the file makes OpenFile fail after a few seconds
// rather than wait forever.
func OpenFile(path string) (*File, error) { return OpenFileWith(path, FileOptions{}) }

// OpenFileWith is OpenFile with options.
func OpenFileWith(path string, o FileOptions) (*File, error) {
	o = o.withDefaults()
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: 5 * time.Second,
		// etcd's settings: the free page list is not written at each commit (a pair of
		// fdatasyncs stays the same; one page less to write) but rebuilt when the file
		// is opened, a scan of a file that stays small here; the map freelist is the
		// faster one when pages are freed in runs. Neither weakens what a crash keeps:
		// the freelist is derived from the pages, which are written as before.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open checkpoint file %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketSinks)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("open checkpoint file %s: %w", path, err)
	}
	return &File{db: db, interval: o.FlushInterval, clock: o.Clock, pending: &overlay{}}, nil
}

func resourceBucketName(res change.Resource) []byte {
	return []byte(res.ID() + "\x00" + res.Scope)
}

// resourceBucket returns the bucket of (sink, res), or nil when it does not exist.
func resourceBucket(tx *bolt.Tx, sink string, res change.Resource) *bolt.Bucket {
	s := tx.Bucket(bucketSinks).Bucket([]byte(sink))
	if s == nil {
		return nil
	}
	return s.Bucket(resourceBucketName(res))
}

// Load returns the checkpoint of (sink, res), 0 when none was committed.
func (f *File) Load(ctx context.Context, sink string, res change.Resource) (change.RV, error) {
	rv, _, err := f.checkpointOf(sink, res)
	if err != nil {
		return 0, fmt.Errorf("load checkpoint of %s/%s: %w", sink, res.ID(), err)
	}
	return rv, nil
}

// Epoch returns the epoch of the checkpoint of (sink, res), 0 when none was committed.
func (f *File) Epoch(ctx context.Context, sink string, res change.Resource) (int, error) {
	_, epoch, err := f.checkpointOf(sink, res)
	if err != nil {
		return 0, fmt.Errorf("load epoch of %s/%s: %w", sink, res.ID(), err)
	}
	return epoch, nil
}

// checkpointOf returns the checkpoint of (sink, res) and its epoch: the newest Commit's,
// written or not. The file is read after the overlays, without holding mu: a flush that
// ends in between moves the file forward only, to what the overlays held.
func (f *File) checkpointOf(sink string, res change.Resource) (change.RV, int, error) {
	id := bucketOf(sink, res)
	f.mu.Lock()
	for _, o := range []*overlay{f.pending, f.flushing} {
		if o == nil {
			continue
		}
		if b := o.buckets[id]; b != nil && b.hasCheckpoint {
			f.mu.Unlock()
			return b.checkpoint, b.epoch, nil
		}
	}
	f.mu.Unlock()
	var rv change.RV
	var epoch int
	err := f.db.View(func(tx *bolt.Tx) error {
		if b := resourceBucket(tx, sink, res); b != nil {
			rv, epoch = getCheckpoint(b), getEpoch(b)
		}
		return nil
	})
	return rv, epoch, err
}

func getCheckpoint(b *bolt.Bucket) change.RV {
	if v := b.Get(keyCheckpoint); len(v) == 8 {
		return change.RV(binary.BigEndian.Uint64(v))
	}
	return 0
}

func getEpoch(b *bolt.Bucket) int {
	if v := b.Get(keyEpoch); len(v) == 4 {
		return int(binary.BigEndian.Uint32(v))
	}
	return 0
}

// KeyIndex calls fn for every live key of (sink, res) in every scope of res's resource,
// in key order: like the PostgreSQL sink's objects table, the index of a relist covers
// the scopes no longer configured too, whose keys the sweeping relist tombstones (out of
// scope) before ForgetScopes drops them. A key in several scopes' buckets is reported
// once, at its newest (epoch, RV). fn runs inside a read transaction, so it must not call
// back into the store's Commit. Pending Commits are written first (a relist is rare; one
// flush then costs less than merging the overlays into the walk).
func (f *File) KeyIndex(ctx context.Context, sink string, res change.Resource, fn func(change.Key, change.Entry) error) error {
	if err := f.flush(nil); err != nil {
		return fmt.Errorf("read key index of %s/%s: %w", sink, res.ID(), err)
	}
	err := f.db.View(func(tx *bolt.Tx) error {
		var buckets []*bolt.Bucket
		forEachScope(tx, sink, res, func(_ string, b *bolt.Bucket) {
			if keys := b.Bucket(bucketKeys); keys != nil {
				buckets = append(buckets, keys)
			}
		})
		n := 0
		each := func(keys *bolt.Bucket, fn func(k []byte, e change.Entry) error) error {
			return keys.ForEach(func(k, v []byte) error {
				if n++; n%4096 == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				e, err := decodeEntry(v)
				if err != nil {
					return fmt.Errorf("key %q: %w", k, err)
				}
				return fn(k, e)
			})
		}
		if len(buckets) == 1 { // the usual case: stream it, no map
			return each(buckets[0], func(k []byte, e change.Entry) error { return fn(change.ParseKey(string(k)), e) })
		}
		merged := map[string]change.Entry{}
		for _, keys := range buckets {
			err := each(keys, func(k []byte, e change.Entry) error {
				if old, ok := merged[string(k)]; !ok || old.Version().Compare(e.Version()) < 0 {
					merged[string(k)] = e
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		for _, k := range slices.Sorted(maps.Keys(merged)) {
			if err := fn(change.ParseKey(k), merged[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read key index of %s/%s: %w", sink, res.ID(), err)
	}
	return nil
}

// forEachScope calls fn with the scope and bucket of every scope of res's resource that
// sink has in tx.
func forEachScope(tx *bolt.Tx, sink string, res change.Resource, fn func(scope string, b *bolt.Bucket)) {
	s := tx.Bucket(bucketSinks).Bucket([]byte(sink))
	if s == nil {
		return
	}
	prefix := []byte(res.ID() + "\x00")
	c := s.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if v == nil { // a bucket
			fn(string(k[len(prefix):]), s.Bucket(k))
		}
	}
}

// Scopes (checkpoint.ScopeStore) returns the scopes of res's resource that sink has.
func (f *File) Scopes(ctx context.Context, sink string, res change.Resource) ([]string, error) {
	var scopes []string
	err := f.flush(nil)
	if err == nil {
		err = f.db.View(func(tx *bolt.Tx) error {
			forEachScope(tx, sink, res, func(scope string, _ *bolt.Bucket) { scopes = append(scopes, scope) })
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("read scopes of %s/%s: %w", sink, res.ID(), err)
	}
	return scopes, nil
}

// ForgetScopes (checkpoint.ScopeStore) drops the checkpoint and key index of every scope
// of res's resource that sink has and keep lacks, in the write of what is pending.
func (f *File) ForgetScopes(ctx context.Context, sink string, res change.Resource, keep []string) error {
	err := f.flush(func(tx *bolt.Tx) error {
		var stale []string
		forEachScope(tx, sink, res, func(scope string, _ *bolt.Bucket) {
			if !slices.Contains(keep, scope) {
				stale = append(stale, scope)
			}
		})
		s := tx.Bucket(bucketSinks).Bucket([]byte(sink))
		for _, scope := range stale {
			if err := s.DeleteBucket([]byte(res.ID() + "\x00" + scope)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget scopes of %s/%s: %w", sink, res.ID(), err)
	}
	return nil
}

// Commit applies b to the key index and sets the checkpoint: in one transaction, or, with
// a flush interval, in memory until the next flush writes it with the others (a flush
// that failed is tried again here first, so that its error reaches the caller rather than
// Commits piling up in memory). The checkpoint never moves backwards in (epoch, RV): a
// batch whose checkpoint is below the stored one (a replay) still applies its changes but
// leaves the checkpoint where it was; a new epoch's checkpoint replaces a higher RV of an
// older epoch.
func (f *File) Commit(ctx context.Context, sink string, b change.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	if f.interval == 0 {
		err = f.flush(func(tx *bolt.Tx) error { return commitTx(tx, sink, b) })
	} else {
		err = f.commitLater(sink, b)
	}
	if err != nil {
		return fmt.Errorf("commit checkpoint of %s/%s: %w", sink, b.Resource.ID(), err)
	}
	return nil
}

// commitTx is a Commit written at once, in tx.
func commitTx(tx *bolt.Tx, sink string, b change.Batch) error {
	r, keys, err := createKeysBucket(tx, sink, resourceBucketName(b.Resource))
	if err != nil {
		return err
	}
	for i := range b.Changes {
		c := &b.Changes[i]
		k := []byte(c.Key.String())
		if old := keys.Get(k); old != nil {
			if v, err := decodeVersion(old); err == nil && olderThan(c, v) {
				continue
			}
		}
		if c.Op == change.OpDelete {
			if err := keys.Delete(k); err != nil {
				return err
			}
			continue
		}
		// bbolt keeps the value slice until the transaction ends: no reuse.
		if err := keys.Put(k, encodeEntry(nil, change.Entry{UID: c.UID, RV: c.RV, Epoch: c.Epoch})); err != nil {
			return err
		}
	}
	if checkpointStays(change.Version{Epoch: getEpoch(r), RV: getCheckpoint(r)}, b.Version()) {
		return nil
	}
	return putCheckpoint(r, b.Checkpoint, b.Epoch)
}

// commitLater applies b to the pending overlay, with commitTx's guards against what the
// overlays and the file hold, and makes sure a flush is due.
func (f *File) commitLater(sink string, b change.Batch) error {
	id := bucketOf(sink, b.Resource)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return errClosed
	}
	var rtx *bolt.Tx // the file, read only for what neither overlay holds
	var r *bolt.Bucket
	file := func() (*bolt.Bucket, error) {
		if rtx == nil {
			var err error
			if rtx, err = f.db.Begin(false); err != nil {
				return nil, err
			}
			r = resourceBucket(rtx, sink, b.Resource)
		}
		return r, nil
	}
	err := f.applyLocked(id, b, file)
	if rtx != nil {
		_ = rtx.Rollback()
	}
	f.armLocked()
	failed := f.flushErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if failed != nil {
		return f.flush(nil)
	}
	return nil
}

// applyLocked applies b to pending as commitTx would apply it to the file, each key's guard
// against what pending, the overlay being flushed or else the file hold. f.mu is held;
// file returns b's bucket in the file (nil when it has none), read at most once.
func (f *File) applyLocked(id bucketID, b change.Batch, file func() (*bolt.Bucket, error)) error {
	var keys *bolt.Bucket
	fileKeys := func() (*bolt.Bucket, error) {
		if keys == nil {
			r, err := file()
			if err != nil || r == nil {
				return nil, err
			}
			keys = r.Bucket(bucketKeys)
		}
		return keys, nil
	}
	// held returns the state of k that a Commit written at once would find.
	held := func(k string) (v change.Version, ok bool, err error) {
		for _, o := range []*overlay{f.pending, f.flushing} {
			if p, found := o.key(id, k); found {
				return change.Version{Epoch: p.epoch, RV: p.rv}, !p.deleted, nil
			}
		}
		keys, err := fileKeys()
		if err != nil || keys == nil {
			return change.Version{}, false, err
		}
		if b := keys.Get([]byte(k)); b != nil {
			if v, err := decodeVersion(b); err == nil {
				return v, true, nil
			}
		}
		return change.Version{}, false, nil
	}
	pb := f.pending.bucket(id, len(b.Changes))
	for i := range b.Changes {
		c := &b.Changes[i]
		k := c.Key.String()
		v, ok, err := held(k)
		if err != nil {
			return err
		}
		if ok && olderThan(c, v) {
			continue
		}
		if c.Op == change.OpDelete {
			pb.keys[k] = pendingKey{deleted: true}
			continue
		}
		pb.keys[k] = pendingKey{val: encodeEntry(nil, change.Entry{UID: c.UID, RV: c.RV, Epoch: c.Epoch}), rv: c.RV, epoch: c.Epoch}
	}
	var curEpoch int
	var cur change.RV
	switch fb := f.flushing.bucketOrNil(id); {
	case pb.hasCheckpoint:
		curEpoch, cur = pb.epoch, pb.checkpoint
	case fb != nil && fb.hasCheckpoint:
		curEpoch, cur = fb.epoch, fb.checkpoint
	default:
		r, err := file()
		if err != nil {
			return err
		}
		if r != nil {
			curEpoch, cur = getEpoch(r), getCheckpoint(r)
		}
	}
	if !checkpointStays(change.Version{Epoch: curEpoch, RV: cur}, b.Version()) {
		pb.checkpoint, pb.epoch, pb.hasCheckpoint = b.Checkpoint, b.Epoch, true
	}
	return nil
}

// armLocked schedules a flush of pending FlushInterval from now, unless one is due
// already, nothing is pending or the file is closed.
func (f *File) armLocked() {
	if f.interval > 0 && f.timer == nil && !f.closed && !f.pending.empty() {
		// On a goroutine of its own, as time.AfterFunc does: a fake clock calls the func
		// while it holds its lock, which the flush's timer.Stop takes.
		f.timer = f.clock.AfterFunc(f.interval, func() { go f.flushDue() })
	}
}

// flushDue is the timer's flush. A failure is kept (flushErr), returned by the next
// Commit and tried again an interval later.
func (f *File) flushDue() { _ = f.flush(nil) }

// flush writes pending, and extra's writes in the same transaction, and returns once they
// are durable; then it runs pending's WhenDurable callbacks. On failure pending goes back
// under the Commits made meanwhile, so they reach the file in order.
func (f *File) flush(extra func(*bolt.Tx) error) error {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	f.mu.Lock()
	o := f.pending
	f.pending = &overlay{}
	if f.timer != nil {
		f.timer.Stop() // pending is empty now; the next Commit arms a new one
		f.timer = nil
	}
	f.flushing = o
	f.mu.Unlock()
	var err error
	if !o.empty() || extra != nil {
		err = f.db.Update(func(tx *bolt.Tx) error {
			if err := o.write(tx); err != nil {
				return err
			}
			if extra != nil {
				return extra(tx)
			}
			return nil
		})
	}
	f.mu.Lock()
	f.flushing = nil
	if err != nil && !o.empty() {
		f.pending = o.under(f.pending)
		f.flushErr = err
		f.armLocked()
	} else if err == nil {
		f.flushErr = nil
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	for _, fn := range o.durable {
		fn()
	}
	return nil
}

// WhenDurable (GroupCommitStore) calls fn once every Commit that returned before it is in
// the file: at once when none is pending, else on the goroutine of the flush that writes
// them, in the order they were registered. fn must not write to the store: a flush runs
// it before letting the next write in.
func (f *File) WhenDurable(fn func()) {
	f.mu.Lock()
	switch {
	case !f.pending.empty():
		f.pending.durable = append(f.pending.durable, fn)
	case f.flushing != nil:
		f.flushing.durable = append(f.flushing.durable, fn)
	default:
		f.mu.Unlock()
		fn()
		return
	}
	f.mu.Unlock()
}

// Flush (GroupCommitStore) writes every pending Commit and returns once they are durable.
func (f *File) Flush(ctx context.Context) error {
	if err := f.flush(nil); err != nil {
		return fmt.Errorf("flush checkpoints: %w", err)
	}
	return nil
}

// Intend adds the live keys of b that b's scope does not hold to its bucket at RV 0
// (IntentStore). A lookup first, in the overlays then the file, so a batch
// of keys the index has already (the steady state: updates) costs no write. The intents
// are durable when Intend returns, whatever the flush interval: they go to the file in
// one transaction with what is pending, after it, so no pending delete written later can
// take an intent back out.
//
// A key only the overlays hold (committed since the last flush) counts as held: its
// batch's own Intend put it in the file before its records went out, and the file loses
// a key only to a flush of its delete, which an Intend of the key then sees.
func (f *File) Intend(ctx context.Context, sink string, b change.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	absent, err := f.absent(sink, b)
	if err != nil {
		return fmt.Errorf("read key index of %s/%s: %w", sink, b.Resource.ID(), err)
	}
	if len(absent) == 0 {
		return nil
	}
	// One intent per key, the last change's (a key deleted and created again within b).
	keys := make([]string, 0, len(absent))
	intents := make([]pendingKey, 0, len(absent))
	at := make(map[string]int, len(absent))
	for _, c := range absent {
		k := c.Key.String()
		p := pendingKey{val: encodeEntry(nil, change.Entry{UID: c.UID, Epoch: c.Epoch}), epoch: c.Epoch}
		if i, ok := at[k]; ok {
			intents[i] = p
			continue
		}
		at[k] = len(keys)
		keys = append(keys, k)
		intents = append(intents, p)
	}
	err = f.flush(func(tx *bolt.Tx) error {
		_, bucket, err := createKeysBucket(tx, sink, resourceBucketName(b.Resource))
		if err != nil {
			return err
		}
		// absent found them not in this scope; only a Commit of this bucket, which its
		// writer makes after this Intend, could have put one in since.
		for i, k := range keys {
			if err := bucket.Put([]byte(k), intents[i].val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("note the keys of %s/%s before sending them: %w", sink, b.Resource.ID(), err)
	}
	if f.interval > 0 {
		// The intents are durable; holding them in pending too spares the Commit that
		// follows a lookup in the file for each (its entries replace them there). A
		// flush may write them again: the same bytes, the keys' state as it is.
		id := bucketOf(sink, b.Resource)
		f.mu.Lock()
		pb := f.pending.bucket(id, len(keys))
		for i, k := range keys {
			if _, ok := pb.keys[k]; !ok {
				pb.keys[k] = intents[i]
			}
		}
		f.armLocked()
		f.mu.Unlock()
	}
	return nil
}

// absent returns the live changes of b whose keys b's own scope of (sink, b.Resource)
// does not hold, in the overlays or the file. Another scope's entry does not count: that
// scope may commit the key's delete before b is committed, and a kill in between would
// leave b's sent record in no scope's index (KeyIndex merges the scopes, keeping the
// highest version, so an intent beside another scope's entry costs nothing else).
func (f *File) absent(sink string, b change.Batch) ([]*change.Change, error) {
	id := bucketOf(sink, b.Resource)
	f.mu.Lock()
	defer f.mu.Unlock()
	var absent []*change.Change
	err := f.db.View(func(tx *bolt.Tx) error {
		var keys *bolt.Bucket // nil: none in the file
		if rb := resourceBucket(tx, sink, b.Resource); rb != nil {
			keys = rb.Bucket(bucketKeys)
		}
		for i := range b.Changes {
			c := &b.Changes[i]
			if c.Op == change.OpDelete {
				continue
			}
			if !f.holdsLocked(id, c.Key.String(), keys) {
				absent = append(absent, c)
			}
		}
		return nil
	})
	return absent, err
}

// holdsLocked reports whether k is live in id: in pending, else in the overlay being
// flushed, else in the file's keys (nil: none).
func (f *File) holdsLocked(id bucketID, k string, keys *bolt.Bucket) bool {
	for _, o := range []*overlay{f.pending, f.flushing} {
		if p, ok := o.key(id, k); ok {
			return !p.deleted
		}
	}
	return keys != nil && keys.Get([]byte(k)) != nil
}

// createKeysBucket returns (creating them when missing) the resource bucket named name
// (resourceBucketName) of sink and its key index bucket.
func createKeysBucket(tx *bolt.Tx, sink string, name []byte) (r, keys *bolt.Bucket, err error) {
	s, err := tx.Bucket(bucketSinks).CreateBucketIfNotExists([]byte(sink))
	if err != nil {
		return nil, nil, err
	}
	if r, err = s.CreateBucketIfNotExists(name); err != nil {
		return nil, nil, err
	}
	keys, err = r.CreateBucketIfNotExists(bucketKeys)
	return r, keys, err
}

// Close writes what is pending and closes the database file.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	f.mu.Unlock()
	err := f.flush(nil)
	if err != nil {
		err = fmt.Errorf("write the last checkpoints: %w", err)
	}
	return errors.Join(err, f.db.Close())
}

// Entry encoding: a format byte, the RV as a uvarint, then the UID. Kubernetes UIDs are
// RFC 4122 UUIDs, stored as their 16 bytes (format 1, 19–26 bytes in all); anything else
// is stored verbatim (format 0). An entry of an epoch above 0 sets entryWithEpoch in the
// format byte and has the epoch as a uvarint after the RV.
const (
	entryRawUID    = 0
	entryUUID16    = 1
	entryWithEpoch = 0x80
)

func encodeEntry(dst []byte, e change.Entry) []byte {
	u, uuid := change.PackUID(e.UID)
	format := byte(entryRawUID)
	if uuid {
		format = entryUUID16
	}
	if e.Epoch > 0 {
		format |= entryWithEpoch
	}
	dst = append(dst, format)
	dst = binary.AppendUvarint(dst, uint64(e.RV))
	if e.Epoch > 0 {
		dst = binary.AppendUvarint(dst, uint64(e.Epoch))
	}
	if uuid {
		return append(dst, u[:]...)
	}
	return append(dst, e.UID...)
}

func decodeEntry(b []byte) (change.Entry, error) {
	epoch, rv, rest, err := decodeHead(b)
	if err != nil {
		return change.Entry{}, err
	}
	switch b[0] &^ entryWithEpoch {
	case entryUUID16:
		if len(rest) != 16 {
			return change.Entry{}, errors.New("key index entry: bad uid")
		}
		return change.Entry{UID: change.UnpackUID((*[16]byte)(rest)), RV: rv, Epoch: epoch}, nil
	case entryRawUID:
		return change.Entry{UID: string(rest), RV: rv, Epoch: epoch}, nil
	}
	return change.Entry{}, fmt.Errorf("key index entry: unknown format %d", b[0])
}

// decodeVersion is decodeEntry's epoch and RV, without the UID: what the replay guard
// compares.
func decodeVersion(b []byte) (change.Version, error) {
	epoch, rv, _, err := decodeHead(b)
	return change.Version{Epoch: epoch, RV: rv}, err
}

// decodeHead decodes an entry up to its UID, which it returns undecoded.
func decodeHead(b []byte) (epoch int, rv change.RV, uid []byte, err error) {
	if len(b) < 2 {
		return 0, 0, nil, errors.New("key index entry too short")
	}
	v, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return 0, 0, nil, errors.New("key index entry: bad resource version")
	}
	rest := b[1+n:]
	var e uint64
	if b[0]&entryWithEpoch != 0 {
		if e, n = binary.Uvarint(rest); n <= 0 {
			return 0, 0, nil, errors.New("key index entry: bad epoch")
		}
		rest = rest[n:]
	}
	return int(e), change.RV(v), rest, nil
}
