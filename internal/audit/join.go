package audit

import "time"

// JoinStats say how the join of audit events to changes went in a window of time: what
// the audit store counts, the metric kube_cdc_audit_join and `kube-cdc status` show.
type JoinStats struct {
	Events       int64     // audit events received in the window
	LastReceived time.Time // the newest event's arrival, ever; zero when none arrived
	Changes      int64     // changes observed in the window (snapshots and inferred deletes left out)
	Exact        int64     // of those, joined exactly
	Nearest      int64     // joined to the nearest event
	// UnmatchedChanges have no actor; UnmatchedEvents (of the window) explain no change.
	UnmatchedChanges, UnmatchedEvents int64
}
