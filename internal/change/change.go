package change

import (
	"encoding/json"
	"time"
)

// Op is what happened to an object.
type Op string

const (
	OpCreate Op = "create"
	OpUpdate Op = "update"
	OpDelete Op = "delete"
)

// Reasons of inferred deletes (Change.Reason).
const (
	// ReasonGone: the object is not in the cluster (a relist lacked it and a lookup found
	// no object with its uid).
	ReasonGone = "gone"
	// ReasonOutOfScope: the object still exists, but no configured scope of its resource
	// covers it any more (relabelled out of a selector, a namespace or selector removed
	// from the configuration).
	ReasonOutOfScope = "out-of-scope"
	// ReasonRecreated: a relist found another object (a new uid) under the key. The old
	// uid was deleted, and its delete is recorded, before the new object's create: at the
	// RV just below the new object's when the LIST showed it (see InferredDeleteBefore);
	// when it was created after the LIST, so that only the lookup at the relist's end
	// found it (Presence), at the LIST's RV (or just above the held version, when another
	// scope streams the new object).
	ReasonRecreated = "recreated"
)

// Resource names one API resource as resolved by discovery.
type Resource struct {
	Group      string // "" for the core group
	Version    string
	Resource   string // plural, lower case: "configmaps"
	Kind       string
	Namespaced bool
	// Scope names the configured subset of the resource that is streamed: "" for all of
	// it, else a digest of its namespaces and selectors. Checkpoints and key indexes are
	// kept per (resource, scope), so changing a selector starts afresh with a relist.
	Scope string
}

// ID is the resource's stable name in checkpoints, metrics and logs: "configmaps",
// "deployments.apps", "widgets.example.com".
func (r Resource) ID() string {
	if r.Group == "" {
		return r.Resource
	}
	return r.Resource + "." + r.Group
}

// Key identifies one object within a resource.
type Key struct {
	Namespace string // "" for cluster-scoped objects
	Name      string
}

// String is "namespace/name", or "name" for cluster-scoped objects: the Kafka record key
// and the key index's key.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Change is one entry of the change log.
type Change struct {
	Cluster  string
	Resource Resource
	Key      Key
	UID      string
	// RV is the object's resourceVersion; for a delete, the RV of the DELETE event; for an
	// inferred delete, the RV of the LIST that revealed it, except for ReasonRecreated
	// when the LIST showed the new object: the RV just below the new object's (see
	// InferredDeleteBefore and ReasonRecreated).
	RV RV
	// Epoch counts the time travels this sink has seen of the resource (0 until the
	// first): an etcd restored from a backup, a cluster rebuilt under the same name. RVs
	// restart lower in a new epoch and may be issued again for other changes, so versions
	// are ordered by (Epoch, RV), never by RV alone.
	Epoch    int
	Op       Op
	Inferred bool // a delete that was not observed, found by the reconcile diff
	// Reason says why an inferred delete happened: ReasonGone, ReasonOutOfScope or
	// ReasonRecreated; "" for observed changes.
	Reason   string
	Snapshot bool // written by a LIST rather than a watch event
	// ListRV is, for a snapshot, the RV of the LIST that read it: the object was as
	// Object says when the cluster was at ListRV. A sink may let it revive a row that an
	// inferred delete at or below ListRV tombstoned (the inferred delete was wrong, or the
	// object came back into scope); 0 for watch events.
	ListRV RV
	// Object is the object's JSON after transforms (managedFields dropped, secrets
	// redacted). For an observed delete it is the last state the apiserver sent; for an
	// inferred delete it is nil.
	Object json.RawMessage
	// Labels is metadata.labels as JSON ("{}" when absent), extracted once by the source
	// so sinks need not decode Object again.
	Labels    json.RawMessage
	ChangedBy string // "manager/operation" of the newest managedFields entry, or ""
	// Time is when the change happened as far as the object itself tells: the newest of
	// its managedFields times, creationTimestamp and deletionTimestamp (second precision).
	// It is the same every time the same change is read, so re-emits stay exact copies.
	// Zero when the object says nothing (inferred deletes, except ReasonRecreated's, which
	// carry the new object's Time).
	Time time.Time
	// ObservedAt is when kube-cdc received the event (lag is measured from it).
	ObservedAt time.Time
}

// EventTime is Time, or ObservedAt where the object gave no time.
func (c *Change) EventTime() time.Time {
	if c.Time.IsZero() {
		return c.ObservedAt
	}
	return c.Time
}

// Batch is an ordered run of changes of one resource. When a sink acknowledges it, its
// checkpoint for Resource becomes Checkpoint, which may be past the last change's RV
// (bookmarks and LIST resource versions advance it without data).
type Batch struct {
	Resource   Resource
	Changes    []Change
	Checkpoint RV
	// Epoch is the epoch of Checkpoint (see Change.Epoch): a store orders checkpoints by
	// (Epoch, Checkpoint), so the first checkpoint of a new epoch replaces a higher RV of
	// the old one. The relist that starts an epoch writes checkpoint 0 until it ends.
	Epoch int
	// TimeTravel is set on the first batch of a new epoch: what revealed it, for a sink
	// that records time travels durably.
	TimeTravel *TimeTravel
	// ClusterUID is the identity of the cluster the batch was read from (the kube-system
	// namespace's uid), for a sink that keeps it with the checkpoint; "" when unknown.
	ClusterUID string
}

// TimeTravel is the evidence that the cluster went back in time under a sink: its
// resource versions are below what the sink already holds.
type TimeTravel struct {
	Epoch      int       // the new epoch
	Reason     string    // TravelListBelowCheckpoint or TravelObjectWentBack
	Checkpoint RV        // the sink's checkpoint when it was found
	ListRV     RV        // the RV of the LIST that revealed it
	Key        Key       // TravelObjectWentBack: the object whose RV went back
	HeldRV     RV        // TravelObjectWentBack: the RV the sink held of it
	FoundIn    string    // the resource (ID) that showed it, when it was found at start
	At         time.Time // when it was found
}

// Held is one version a sink holds, live or tombstoned (pipeline.NewestKeeper).
type Held struct {
	Key Key
	Entry
	Deleted  bool // a tombstone: the version is the delete's
	Inferred bool // the tombstone's delete was inferred, not observed
}

// Reasons of time travels (TimeTravel.Reason).
const (
	// TravelListBelowCheckpoint: a LIST's RV is below the sink's checkpoint; the cluster
	// has not reached what the sink already saw (an etcd restore, a rebuilt cluster).
	TravelListBelowCheckpoint = "list-below-checkpoint"
	// TravelObjectWentBack: a LIST shows an object (same uid) at an RV below the version
	// the sink holds; an etcd restored to a backup older than that version.
	TravelObjectWentBack = "object-went-back"
	// TravelAnotherResource: another resource of the sink showed the cluster gone back
	// at start (TimeTravel.FoundIn); this one, which may not show it (quiet since the
	// backup), relists in a new epoch too.
	TravelAnotherResource = "another-resource"
	// TravelClusterIdentity: the sink's checkpoints were taken in another cluster (another
	// kube-system uid) under the same `cluster` name: a cluster rebuilt.
	TravelClusterIdentity = "cluster-identity"
)

// Entry is what a sink holds of one live object: the key index's value.
type Entry struct {
	UID   string
	RV    RV
	Epoch int // the epoch the version was written in (Change.Epoch)
	// Drifted says the sink's copy is no longer what kube-cdc wrote of this version (a
	// row edited by hand): the reconcile diff rewrites it although (uid, RV) match. Only
	// a sink that can tell sets it (PostgreSQL); the others can lose keys, never edit them.
	Drifted bool
}

// InferredDeleteBefore is the inferred delete (ReasonRecreated) of held, the object a
// sink holds under next's key, when a LIST shows next there with another uid: the held
// object was deleted and next created under its name.
//
// Its RV is next.RV-1. The held object's delete came before next's creation, which is at
// or below next.RV, so at next.RV-1 the held object was gone, and held.RV < next.RV-1 <
// next.RV: per key the RVs still grow (an RV-guarded upsert takes the delete and then
// the create; a consumer keeping the highest RV per key drops neither). The LIST's RV,
// which other inferred deletes carry, is above next.RV and would put the delete after
// the create in RV order.
//
// Its Time is next's: the held object had ended by then. It is the same every time the
// same LIST is reconciled again (re-emits stay exact copies), and a consumer ordering by
// time (Kafka's ts_ms) does not see the delete after the create, as it would with the
// time of observation.
func InferredDeleteBefore(next Change, held Entry) Change {
	rv := next.RV
	if rv > 0 {
		rv--
	}
	return Change{Cluster: next.Cluster, Resource: next.Resource, Key: next.Key, UID: held.UID, RV: rv,
		Op: OpDelete, Inferred: true, Reason: ReasonRecreated, Time: next.Time, ObservedAt: next.ObservedAt}
}
