package checkpoint

import (
	"encoding/binary"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// Group commits (FileOptions.FlushInterval): Commit applies a batch to pending, an
// in-memory overlay of the file, and returns; a flush writes the overlay in one bbolt
// transaction (one pair of fdatasyncs for every batch committed in the interval). Reads
// see pending, then the overlay being flushed, then the file.
//
// The overlay holds each key's final state as sequential Commits would have left it in
// the file (the replay guard is applied when a batch enters the overlay, against what
// the file and the overlay hold then), so a flush writes it verbatim. A flush that fails
// puts its overlay back under the newer one: batches reach the file in the order they were
// committed, never a newer checkpoint without an older batch's keys.

// bucketID names the bucket of (sink, resource, scope).
type bucketID struct{ sink, res, scope string }

func bucketOf(sink string, res change.Resource) bucketID {
	return bucketID{sink: sink, res: res.ID(), scope: res.Scope}
}

// pendingKey is a key's state to be written: its encoded entry (encodeEntry), or deleted.
// rv and epoch are the entry's, kept for the replay guard.
type pendingKey struct {
	val     []byte
	rv      change.RV
	epoch   int
	deleted bool
}

// pendingBucket is what Commits changed in one bucket.
type pendingBucket struct {
	keys map[string]pendingKey
	// the checkpoint and its epoch, when a Commit moved it
	checkpoint    change.RV
	epoch         int
	hasCheckpoint bool
}

// overlay is a set of Commits not yet in the file.
type overlay struct {
	buckets map[bucketID]*pendingBucket
	// durable are the WhenDurable callbacks waiting for this overlay to be written.
	durable []func()
}

func (o *overlay) empty() bool { return o == nil || len(o.buckets) == 0 }

// bucket returns o's bucket id, created with room for size keys when missing.
func (o *overlay) bucket(id bucketID, size int) *pendingBucket {
	if o.buckets == nil {
		o.buckets = map[bucketID]*pendingBucket{}
	}
	b := o.buckets[id]
	if b == nil {
		b = &pendingBucket{keys: make(map[string]pendingKey, size)}
		o.buckets[id] = b
	}
	return b
}

// key returns the overlay's state of k in id, if it has one.
func (o *overlay) key(id bucketID, k string) (pendingKey, bool) {
	if o == nil {
		return pendingKey{}, false
	}
	b := o.buckets[id]
	if b == nil {
		return pendingKey{}, false
	}
	p, ok := b.keys[k]
	return p, ok
}

// write puts o in the file, as it is: the replay guard was applied when each batch
// entered it.
func (o *overlay) write(tx *bolt.Tx) error {
	for id, pb := range o.buckets {
		r, keys, err := createKeysBucket(tx, id.sink, []byte(id.res+"\x00"+id.scope))
		if err != nil {
			return err
		}
		// In key order: bbolt inserts into its nodes' sorted slices, and keys in order
		// land at their ends (a bulk of new keys: 2× faster than map order).
		for _, k := range slices.Sorted(maps.Keys(pb.keys)) {
			if p := pb.keys[k]; p.deleted {
				err = keys.Delete([]byte(k))
			} else {
				err = keys.Put([]byte(k), p.val)
			}
			if err != nil {
				return err
			}
		}
		if pb.hasCheckpoint {
			if err := putCheckpoint(r, pb.checkpoint, pb.epoch); err != nil {
				return err
			}
		}
	}
	return nil
}

// under returns o with newer's changes applied on top of it: newer was committed after o
// (its guards already saw o), so its states win.
func (o *overlay) under(newer *overlay) *overlay {
	for id, nb := range newer.buckets {
		ob := o.bucket(id, len(nb.keys))
		for k, p := range nb.keys {
			ob.keys[k] = p
		}
		if nb.hasCheckpoint {
			ob.checkpoint, ob.epoch, ob.hasCheckpoint = nb.checkpoint, nb.epoch, true
		}
	}
	o.durable = append(o.durable, newer.durable...)
	return o
}

func putCheckpoint(r *bolt.Bucket, rv change.RV, epoch int) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(rv))
	if err := r.Put(keyCheckpoint, v[:]); err != nil {
		return err
	}
	var e [4]byte
	binary.BigEndian.PutUint32(e[:], uint32(epoch))
	return r.Put(keyEpoch, e[:])
}

// olderThan reports whether c is older than the held version, so that a replay
// must leave the entry alone: per key, versions only grow in (epoch, RV) (the same guard
// as the PostgreSQL sink's upsert). RV 0 means the resource has no integer RVs and falls
// back to arrival order.
func olderThan(c *change.Change, held change.Version) bool {
	return c.RV != 0 && held.Compare(c.Version()) > 0
}

// checkpointStays reports whether a batch's checkpoint next leaves the held one cur in
// place: it never moves backwards in (epoch, RV), and a new epoch's
// checkpoint replaces a higher RV of an older epoch.
func checkpointStays(cur, next change.Version) bool {
	return cur.Compare(next) >= 0
}

// bucketOrNil is o's bucket id, nil when o or the bucket is absent.
func (o *overlay) bucketOrNil(id bucketID) *pendingBucket {
	if o == nil {
		return nil
	}
	return o.buckets[id]
}
