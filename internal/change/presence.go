package change

// Presence is what the cluster holds under a key that a sink holds and a relist did not
// show, as the relist's lookup found it (pipeline.Target.Lookup), or under the key of a
// watch's DELETED event.
type Presence struct {
	// UID is the uid of the object under the key now; "" when there is none.
	UID string
	// InScope says some configured scope of the resource covers that object; Here says
	// the looking target's own scope does (so its own stream writes the object, at an RV
	// above the LIST's).
	InScope, Here bool
	// Unreadable says no scope covers the key's namespace and the apiserver forbids
	// reading it: whatever it holds is out of every scope.
	Unreadable bool
}

// End is how the object with uid held, which a sink holds under the key, ends: the
// reason of its inferred delete, or "" when it lives on in some scope (whose stream
// writes it). Another uid under the key means the held object was deleted: reason
// ReasonRecreated when the new object is in some scope (it is written too, after the
// delete), else ReasonGone.
func (p Presence) End(held string) string {
	switch {
	case p.Unreadable:
		return ReasonOutOfScope
	case p.UID == "":
		return ReasonGone
	case p.UID != held && p.InScope:
		return ReasonRecreated
	case p.UID != held:
		return ReasonGone
	case p.InScope:
		return ""
	default:
		return ReasonOutOfScope
	}
}
