package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// The published types' reading of an EventList: the oracle Decode and DecodeEvent must
// agree with (TestBothDecodersAgree), and BenchmarkDecode's baseline. Production reads
// every event through extractJSON alone.

// decodeTyped is Decode through k8s.io/apiserver's published types.
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

// A log line is read as a list's item is: DecodeEvent says of each fixture event what
// the published types say of it.
func TestALogLineIsReadAsThePublishedTypesReadIt(t *testing.T) {
	items := gjson.Get(fixtureList(), "items").Array()
	if len(items) < 5 {
		t.Fatalf("the fixture has %d items", len(items))
	}
	for i, it := range items {
		var a auditv1.Event
		if err := json.Unmarshal([]byte(it.Raw), &a); err != nil {
			t.Fatal(err)
		}
		want, why := extract(&a)
		var wantCounts Counts
		wantKept := wantCounts.count(why)
		got, kept, counts, err := DecodeEvent([]byte(it.Raw))
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		for _, e := range []*Event{&want, &got} {
			e.RequestReceived, e.StageTimestamp = e.RequestReceived.UTC(), e.StageTimestamp.UTC()
			for _, l := range []*[]string{&e.Groups, &e.SourceIPs, &e.DeletedUIDs} {
				if len(*l) == 0 {
					*l = nil
				}
			}
		}
		if kept != wantKept || counts != wantCounts || !reflect.DeepEqual(got, want) {
			t.Errorf("item %d: DecodeEvent = %+v kept=%v %+v\npublished types: %+v kept=%v %+v", i, got, kept, counts, want, wantKept, wantCounts)
		}
	}
	for _, line := range []string{``, `{`, `[]`, `"x"`} {
		if _, _, _, err := DecodeEvent([]byte(line)); err == nil {
			t.Errorf("DecodeEvent(%q) = nil error", line)
		}
	}
}
