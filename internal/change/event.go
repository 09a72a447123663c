package change

// EventType says what an Event carries.
type EventType int

const (
	// Changed carries a watch event as a change (Op and RV set, Snapshot false).
	Changed EventType = iota
	// RelistBegin starts a relist: Listed events follow, then RelistEnd. A relist that
	// fails part-way is started again with another RelistBegin.
	RelistBegin
	// Listed carries one object of a relist (Snapshot true, Op left to the reconcile
	// diff, which alone knows whether the sink holds it).
	Listed
	// RelistEnd ends a relist; RV is the LIST's resource version. Keys the sink holds
	// that were not listed are gone.
	RelistEnd
	// Progress says every change up to RV was delivered (a bookmark).
	Progress
	// Established says the server accepted the stream's watch from RV: the point the
	// stream started from (the checkpoint it resumed, or the LIST's RV after a relist).
	// What the stream emitted before it reaches back to that point; what follows is live.
	Established
)

func (t EventType) String() string {
	return [...]string{"changed", "relist-begin", "listed", "relist-end", "progress", "established"}[t]
}

// Event is what a source stream emits, in order: a value, like client-go's Delta. The
// pipeline turns events into batches per sink.
type Event struct {
	Type   EventType
	Change Change // Changed, Listed
	RV     RV     // RelistEnd, Progress, Established
	// Round is, on a RelistBegin, the number the pipeline gave the requested relists
	// (resync, resnapshot) this relist answers; 0 for none. Sources leave it 0.
	Round uint64
	// ListTotal is, on a Listed event, an estimate of how many objects the relist lists in
	// all (those listed so far plus the LIST's metadata.remainingItemCount); 0 when the
	// server gives none (a LIST under a selector). It feeds progress lines only.
	ListTotal int
}
