package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// File is the file store: one bbolt database holding, per (sink, resource, scope), the
// checkpoint and the key index. The layout is
//
//	sinks/<sink>/<resource id>\x00<scope>/checkpoint   → RV, 8 bytes big endian
//	sinks/<sink>/<resource id>\x00<scope>/epoch        → the checkpoint's epoch, 4 bytes big endian (absent: 0)
//	sinks/<sink>/<resource id>\x00<scope>/keys/<key>   → entry (see encodeEntry)
//
// Each Commit is one bbolt transaction, so the key index and the checkpoint move together,
// and a crash leaves the previous commit intact.
type File struct {
	db *bolt.DB
}

var (
	bucketSinks   = []byte("sinks")
	bucketKeys    = []byte("keys")
	keyCheckpoint = []byte("checkpoint")
	keyEpoch      = []byte("epoch")
)

// OpenFile opens (creating if needed) the bbolt file at path. A second process holding
// the file makes OpenFile fail after a few seconds rather than wait forever.
func OpenFile(path string) (*File, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
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
	return &File{db: db}, nil
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
	var rv change.RV
	err := f.db.View(func(tx *bolt.Tx) error {
		b := resourceBucket(tx, sink, res)
		if b == nil {
			return nil
		}
		if v := b.Get(keyCheckpoint); len(v) == 8 {
			rv = change.RV(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("load checkpoint of %s/%s: %w", sink, res.ID(), err)
	}
	return rv, nil
}

// Epoch returns the epoch of the checkpoint of (sink, res), 0 when none was committed.
func (f *File) Epoch(ctx context.Context, sink string, res change.Resource) (int, error) {
	var epoch int
	err := f.db.View(func(tx *bolt.Tx) error {
		if b := resourceBucket(tx, sink, res); b != nil {
			epoch = getEpoch(b)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("load epoch of %s/%s: %w", sink, res.ID(), err)
	}
	return epoch, nil
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
// back into the store's Commit.
func (f *File) KeyIndex(ctx context.Context, sink string, res change.Resource, fn func(change.Key, change.Entry) error) error {
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
			return each(buckets[0], func(k []byte, e change.Entry) error { return fn(parseKey(string(k)), e) })
		}
		merged := map[string]change.Entry{}
		for _, keys := range buckets {
			err := each(keys, func(k []byte, e change.Entry) error {
				if old, ok := merged[string(k)]; !ok || old.Epoch < e.Epoch || old.Epoch == e.Epoch && old.RV < e.RV {
					merged[string(k)] = e
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		for _, k := range slices.Sorted(maps.Keys(merged)) {
			if err := fn(parseKey(k), merged[k]); err != nil {
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
	err := f.db.View(func(tx *bolt.Tx) error {
		forEachScope(tx, sink, res, func(scope string, _ *bolt.Bucket) { scopes = append(scopes, scope) })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read scopes of %s/%s: %w", sink, res.ID(), err)
	}
	return scopes, nil
}

// ForgetScopes (checkpoint.ScopeStore) drops the checkpoint and key index of every scope
// of res's resource that sink has and keep lacks.
func (f *File) ForgetScopes(ctx context.Context, sink string, res change.Resource, keep []string) error {
	err := f.db.Update(func(tx *bolt.Tx) error {
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

// Commit applies b to the key index and sets the checkpoint, in one transaction. The
// checkpoint never moves backwards in (epoch, RV): a batch whose checkpoint is below the
// stored one (a replay) still applies its changes but leaves the checkpoint where it
// was; a new epoch's checkpoint replaces a higher RV of an older epoch.
func (f *File) Commit(ctx context.Context, sink string, b change.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := f.db.Update(func(tx *bolt.Tx) error {
		r, keys, err := createKeysBucket(tx, sink, b.Resource)
		if err != nil {
			return err
		}
		for _, c := range b.Changes {
			k := []byte(c.Key.String())
			// A replay of an older batch must not undo a newer version of the key: per
			// key, versions only grow in (epoch, RV) (the same guard as the PostgreSQL
			// sink's upsert). RV 0 means the resource has no integer RVs and falls back
			// to arrival order.
			if old := keys.Get(k); old != nil && c.RV != 0 {
				if e, err := decodeEntry(old); err == nil && (e.Epoch > c.Epoch || e.Epoch == c.Epoch && e.RV > c.RV) {
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
		var cur change.RV
		if v := r.Get(keyCheckpoint); len(v) == 8 {
			cur = change.RV(binary.BigEndian.Uint64(v))
		}
		if epoch := getEpoch(r); epoch > b.Epoch || epoch == b.Epoch && cur >= b.Checkpoint {
			return nil
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(b.Checkpoint))
		if err := r.Put(keyCheckpoint, v[:]); err != nil {
			return err
		}
		var e [4]byte
		binary.BigEndian.PutUint32(e[:], uint32(b.Epoch))
		return r.Put(keyEpoch, e[:])
	})
	if err != nil {
		return fmt.Errorf("commit checkpoint of %s/%s: %w", sink, b.Resource.ID(), err)
	}
	return nil
}

// Close closes the database file.
// Intend adds the live keys of b that no scope of (sink, b.Resource) holds to b's scope
// bucket at RV 0 (IntentStore). A read transaction looks them up first, so a batch of keys
// the index has already (the steady state: updates) costs no write.
func (f *File) Intend(ctx context.Context, sink string, b change.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var absent []change.Change
	if err := f.db.View(func(tx *bolt.Tx) error {
		var buckets []*bolt.Bucket
		forEachScope(tx, sink, b.Resource, func(_ string, sb *bolt.Bucket) {
			if keys := sb.Bucket(bucketKeys); keys != nil {
				buckets = append(buckets, keys)
			}
		})
		for _, c := range b.Changes {
			if c.Op == change.OpDelete {
				continue
			}
			k := []byte(c.Key.String())
			if !slices.ContainsFunc(buckets, func(keys *bolt.Bucket) bool { return keys.Get(k) != nil }) {
				absent = append(absent, c)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read key index of %s/%s: %w", sink, b.Resource.ID(), err)
	}
	if len(absent) == 0 {
		return nil
	}
	err := f.db.Update(func(tx *bolt.Tx) error {
		_, keys, err := createKeysBucket(tx, sink, b.Resource)
		if err != nil {
			return err
		}
		for _, c := range absent {
			if keys.Get([]byte(c.Key.String())) != nil {
				continue
			}
			if err := keys.Put([]byte(c.Key.String()), encodeEntry(nil, change.Entry{UID: c.UID, Epoch: c.Epoch})); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("note the keys of %s/%s before sending them: %w", sink, b.Resource.ID(), err)
	}
	return nil
}

// createKeysBucket returns (creating them when missing) the bucket of (sink, res) and its
// key index bucket.
func createKeysBucket(tx *bolt.Tx, sink string, res change.Resource) (r, keys *bolt.Bucket, err error) {
	s, err := tx.Bucket(bucketSinks).CreateBucketIfNotExists([]byte(sink))
	if err != nil {
		return nil, nil, err
	}
	if r, err = s.CreateBucketIfNotExists(resourceBucketName(res)); err != nil {
		return nil, nil, err
	}
	keys, err = r.CreateBucketIfNotExists(bucketKeys)
	return r, keys, err
}

func (f *File) Close() error { return f.db.Close() }

// parseKey inverts change.Key.String. Namespaces and names cannot contain "/".
func parseKey(s string) change.Key {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return change.Key{Namespace: s[:i], Name: s[i+1:]}
		}
	}
	return change.Key{Name: s}
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
	u, uuid := parseUUID(e.UID)
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
	if len(b) < 2 {
		return change.Entry{}, errors.New("key index entry too short")
	}
	rv, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return change.Entry{}, errors.New("key index entry: bad resource version")
	}
	rest := b[1+n:]
	var epoch uint64
	if b[0]&entryWithEpoch != 0 {
		if epoch, n = binary.Uvarint(rest); n <= 0 {
			return change.Entry{}, errors.New("key index entry: bad epoch")
		}
		rest = rest[n:]
	}
	switch b[0] &^ entryWithEpoch {
	case entryUUID16:
		if len(rest) != 16 {
			return change.Entry{}, errors.New("key index entry: bad uid")
		}
		return change.Entry{UID: formatUUID(rest), RV: change.RV(rv), Epoch: int(epoch)}, nil
	case entryRawUID:
		return change.Entry{UID: string(rest), RV: change.RV(rv), Epoch: int(epoch)}, nil
	}
	return change.Entry{}, fmt.Errorf("key index entry: unknown format %d", b[0])
}

// parseUUID parses the canonical lower-case 8-4-4-4-12 form only, so formatUUID gives the
// same string back.
func parseUUID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[j] = hi<<4 | lo
		j++
		i += 2
	}
	return u, true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func formatUUID(u []byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}
