package audit

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Event is what the join needs of one audit event that made (or may have made) a change.
type Event struct {
	AuditID string
	Verb    string // create, update, patch, delete or deletecollection

	// objectRef: Group "" for the core group.
	Group, Resource, Subresource, Namespace, Name string
	// ObjectUID is objectRef.uid: the uid the request named (an update's body), "" if none.
	ObjectUID string

	// Username is who the change was made as: the impersonated user when there was one,
	// else the authenticated user; UserUID and Groups are that user's.
	Username, UserUID string
	Groups            []string
	// Impersonator is the authenticated user who impersonated Username; "" when nobody did.
	Impersonator string
	UserAgent    string
	SourceIPs    []string
	Code         int32 // responseStatus.code

	RequestReceived, StageTimestamp time.Time

	// ResponseRV and ResponseUID are the response object's metadata.resourceVersion and
	// uid (0 and "" when the response carries no object: level Metadata or Request, or a
	// delete answered with a Status); a Status answering a delete names the uid in
	// details.uid, kept in ResponseUID.
	ResponseRV  uint64
	ResponseUID string
	// DeletedUIDs are the uids of the items of a deletecollection's response list.
	DeletedUIDs []string
}

// Counts say what Decode did with each event of a list.
type Counts struct {
	Kept int
	// NotWrite: another stage, a read verb or no objectRef (a non-resource request).
	NotWrite int
	// Refused: a write answered with a non-2xx status (403, 409, 422…); it changed nothing.
	Refused int
	// DryRun: a write with dryRun in its URI; it changed nothing.
	DryRun int
}

// WriteVerbs are the verbs of requests that change objects.
var WriteVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// Decode reads an audit.k8s.io/v1 EventList from r and returns the events kept (see the
// package doc) with the counts of the others. A body that is not an EventList is an
// error; a list is read whole or not at all.
func Decode(r io.Reader) ([]Event, Counts, error) { return decodeList(r) }

// DecodeEvent reads one audit.k8s.io/v1 Event (a line of an audit log file) and says
// whether it is kept, with the counts it adds (one of Counts' fields is 1). Its fields are
// extracted as Decode extracts a list's items (extractJSON): one definition for both.
func DecodeEvent(b []byte) (Event, bool, Counts, error) {
	if !gjson.ValidBytes(b) {
		return Event{}, false, Counts{}, errors.New("decode an audit Event: not a JSON value")
	}
	e, why, err := extractJSON(gjson.ParseBytes(b))
	if err != nil {
		return Event{}, false, Counts{}, fmt.Errorf("decode an audit Event: %w", err)
	}
	var c Counts
	// Detached: a kept event holds none of the line (its request and response objects).
	return e.detached(), c.count(why), c, nil
}

// count adds one event of verdict why to c and reports whether it is kept.
func (c *Counts) count(why verdict) bool {
	switch why {
	case kept:
		c.Kept++
	case notWrite:
		c.NotWrite++
	case refused:
		c.Refused++
	case dryRun:
		c.DryRun++
	}
	return why == kept
}

// Add adds o's counts to c.
func (c *Counts) Add(o Counts) {
	c.Kept += o.Kept
	c.NotWrite += o.NotWrite
	c.Refused += o.Refused
	c.DryRun += o.DryRun
}

type verdict int

const (
	kept verdict = iota
	notWrite
	refused
	dryRun
)

// isDryRun says whether the request URI asks for a dry run (?dryRun=All): the apiserver
// answers as if it wrote, and writes nothing.
func isDryRun(uri string) bool {
	_, query, ok := strings.Cut(uri, "?")
	return ok && strings.Contains(query, "dryRun=")
}
