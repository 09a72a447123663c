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
	// inferred delete, the RV of the LIST that revealed it.
	RV       RV
	Op       Op
	Inferred bool // a delete that was not observed, found by the reconcile diff
	// Reason says why an inferred delete happened: ReasonGone or ReasonOutOfScope; "" for
	// observed changes.
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
	// Zero when the object says nothing (inferred deletes).
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
}

// Entry is what a sink holds of one live object: the key index's value.
type Entry struct {
	UID string
	RV  RV
}
