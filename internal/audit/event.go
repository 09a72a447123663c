package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
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

// decodeTyped is Decode through k8s.io/apiserver's published types: what decodeList
// must agree with (TestBothDecodersAgree), and its benchmark's baseline.
func decodeTyped(r io.Reader) ([]Event, Counts, error) {
	var list auditv1.EventList
	dec := json.NewDecoder(r)
	if err := dec.Decode(&list); err != nil {
		return nil, Counts{}, fmt.Errorf("decode the audit EventList: %w", err)
	}
	if list.Kind != "" && list.Kind != "EventList" {
		return nil, Counts{}, fmt.Errorf("decode the audit EventList: kind %q, want EventList", list.Kind)
	}
	var c Counts
	out := make([]Event, 0, len(list.Items))
	for i := range list.Items {
		if e, why := extract(&list.Items[i]); c.count(why) {
			out = append(out, e)
		}
	}
	return out, c, nil
}

// DecodeEvent reads one audit.k8s.io/v1 Event (a line of an audit log file) and says
// whether it is kept, with the counts it adds (one of Counts' fields is 1).
func DecodeEvent(b []byte) (Event, bool, Counts, error) {
	var a auditv1.Event
	if err := json.Unmarshal(b, &a); err != nil {
		return Event{}, false, Counts{}, fmt.Errorf("decode an audit Event: %w", err)
	}
	e, why := extract(&a)
	var c Counts
	return e, c.count(why), c, nil
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

func extract(a *auditv1.Event) (Event, verdict) {
	if a.Stage != auditv1.StageResponseComplete || !WriteVerbs[a.Verb] || a.ObjectRef == nil || a.ObjectRef.Resource == "" || a.AuditID == "" {
		return Event{}, notWrite
	}
	code := int32(0)
	if a.ResponseStatus != nil {
		code = a.ResponseStatus.Code
	}
	if code < 200 || code > 299 {
		return Event{}, refused
	}
	if isDryRun(a.RequestURI) {
		return Event{}, dryRun
	}
	ref := a.ObjectRef
	e := Event{
		AuditID: string(a.AuditID), Verb: a.Verb,
		Group: ref.APIGroup, Resource: ref.Resource, Subresource: ref.Subresource,
		Namespace: ref.Namespace, Name: ref.Name, ObjectUID: string(ref.UID),
		Username: a.User.Username, UserUID: a.User.UID, Groups: a.User.Groups,
		UserAgent: a.UserAgent, SourceIPs: a.SourceIPs, Code: code,
		RequestReceived: a.RequestReceivedTimestamp.Time, StageTimestamp: a.StageTimestamp.Time,
	}
	if u := a.ImpersonatedUser; u != nil && u.Username != "" {
		e.Impersonator = e.Username
		e.Username, e.UserUID, e.Groups = u.Username, u.UID, u.Groups
	}
	if a.ResponseObject != nil {
		// Only metadata is read; the body (a Secret's data) goes no further.
		resp := a.ResponseObject.Raw
		switch gjson.GetBytes(resp, "kind").String() {
		case "Status":
			e.ResponseUID = gjson.GetBytes(resp, "details.uid").String()
		default:
			if strings.HasSuffix(gjson.GetBytes(resp, "kind").String(), "List") {
				for _, u := range gjson.GetBytes(resp, "items.#.metadata.uid").Array() {
					e.DeletedUIDs = append(e.DeletedUIDs, u.String())
				}
				break
			}
			meta := gjson.GetBytes(resp, "metadata")
			e.ResponseUID = meta.Get("uid").String()
			if rv, err := strconv.ParseUint(meta.Get("resourceVersion").String(), 10, 64); err == nil {
				e.ResponseRV = rv
			}
			if e.Name == "" { // a create with generateName
				e.Name = meta.Get("name").String()
			}
		}
	}
	return e, kept
}

// isDryRun says whether the request URI asks for a dry run (?dryRun=All): the apiserver
// answers as if it wrote, and writes nothing.
func isDryRun(uri string) bool {
	_, query, ok := strings.Cut(uri, "?")
	return ok && strings.Contains(query, "dryRun=")
}
