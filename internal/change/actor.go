package change

import (
	"encoding/json"
	"time"
)

// How an actor was joined to its change (docs/contract.md, "actor").
const (
	// MatchExact: the audit event's response carried the change's resourceVersion on its
	// key (or, for a delete, named its uid).
	MatchExact = "exact"
	// MatchNearest: no exact event; the event of the key closest in time with a verb
	// that can make such a change, never one of another uid.
	MatchNearest = "nearest"
)

// Actor is who made a change: the user behind it, from the apiserver's audit events.
// It is the one type the "who" wing passes around, from the audit store's join to the
// envelope a Kafka or stdout sink writes and the version `kube-cdc history` prints; only
// a wire format converts it (the envelope's source fields, -o json below).
type Actor struct {
	Username     string `json:"username"`               // the user the write was made as (the impersonated one)
	Impersonator string `json:"impersonator,omitempty"` // who impersonated Username; "" when nobody did
	UserAgent    string `json:"userAgent"`
	Verb         string `json:"verb"`
	Subresource  string `json:"subresource,omitempty"`
	AuditID      string `json:"auditID"`
	Match        string `json:"match"` // MatchExact or MatchNearest
	// Distance is a nearest match's distance in time between the event and the change's
	// observation; 0 when exact.
	Distance time.Duration `json:"-"`
}

// MarshalJSON writes the fields as tagged, and a nearest match's distance rounded to the
// millisecond as a duration string ("distance":"1.234s"; absent when exact): what
// `kube-cdc history -o json` prints.
func (a Actor) MarshalJSON() ([]byte, error) {
	type fields Actor // without this method
	var d string
	if a.Match != MatchExact {
		d = a.Distance.Round(time.Millisecond).String()
	}
	return json.Marshal(struct {
		fields
		Distance string `json:"distance,omitempty"`
	}{fields(a), d})
}
