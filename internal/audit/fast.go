package audit

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/tidwall/gjson"
)

// decodeList reads an EventList as it streams: one item at a time is held in memory,
// never the whole body, so a batch of 400 events with their request and response objects
// costs about its largest event, whatever its size (TestDecodingABatchHoldsOneEventNotTheBody).
// jsontext (encoding/json/v2's syntactic layer) walks the list and cuts out each item; of
// an item, only the fields the join needs are looked up (gjson), without decoding the
// rest (the request and response objects, most of a RequestResponse batch's bytes):
// faster than decoding into the published types (BenchmarkDecode), whose field names the
// lookups below follow (k8s.io/apiserver/pkg/apis/audit/v1) and which the tests decode
// with to check them (TestBothDecodersAgree). DecodeEvent reads a log line through the
// same extractJSON. An error of r (a body over its limit:
// *http.MaxBytesError) is returned wrapped.
func decodeList(r io.Reader) ([]Event, Counts, error) {
	// The apiserver writes no duplicate names; checking for them would only cost time.
	dec := jsontext.NewDecoder(r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	out, c, err := streamList(dec)
	if err != nil {
		return nil, Counts{}, fmt.Errorf("decode the audit EventList: %w", err)
	}
	return out, c, nil
}

func streamList(dec *jsontext.Decoder) ([]Event, Counts, error) {
	if err := expect(dec, '{', "not a JSON object"); err != nil {
		return nil, Counts{}, err
	}
	var c Counts
	var out []Event
	for dec.PeekKind() != '}' {
		key, err := dec.ReadToken()
		if err != nil {
			return nil, Counts{}, err
		}
		switch key.String() {
		case "items":
			switch dec.PeekKind() {
			case 'n':
				if err := dec.SkipValue(); err != nil {
					return nil, Counts{}, err
				}
				continue
			case '[':
			default:
				return nil, Counts{}, errors.New("items is not an array")
			}
			if _, err := dec.ReadToken(); err != nil {
				return nil, Counts{}, err
			}
			for dec.PeekKind() != ']' {
				// The item's bytes are the decoder's buffer, valid until the next read.
				item, err := dec.ReadValue()
				if err != nil {
					return nil, Counts{}, err
				}
				e, why, err := extractJSON(gjson.ParseBytes(item))
				if err != nil {
					return nil, Counts{}, err
				}
				if c.count(why) {
					// gjson's strings are slices of the item: copied, so a kept event does
					// not hold its item's objects in memory.
					out = append(out, e.detached())
				}
			}
			if _, err := dec.ReadToken(); err != nil {
				return nil, Counts{}, err
			}
		case "kind":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, Counts{}, err
			}
			if k := gjson.ParseBytes(v).String(); k != "EventList" {
				return nil, Counts{}, fmt.Errorf("kind %q, want EventList", k)
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, Counts{}, err
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, Counts{}, err
	}
	// Nothing but white space may follow.
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the EventList")
		}
		return nil, Counts{}, err
	}
	return out, c, nil
}

// expect reads the next token, which must be the delimiter d; what otherwise is the error.
func expect(dec *jsontext.Decoder, d jsontext.Kind, what string) error {
	if dec.PeekKind() != d {
		if _, err := dec.ReadToken(); err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		return errors.New(what)
	}
	_, err := dec.ReadToken()
	return err
}

// detached is e with its own copy of every string, sharing no memory with the JSON it
// was read from.
func (e Event) detached() Event {
	for _, s := range []*string{&e.AuditID, &e.Verb, &e.Group, &e.Resource, &e.Subresource, &e.Namespace, &e.Name,
		&e.ObjectUID, &e.Username, &e.UserUID, &e.Impersonator, &e.UserAgent, &e.ResponseUID} {
		*s = strings.Clone(*s)
	}
	for _, a := range [][]string{e.Groups, e.SourceIPs, e.DeletedUIDs} {
		for i := range a {
			a[i] = strings.Clone(a[i])
		}
	}
	return e
}

// extractJSON is extract on an event's JSON.
func extractJSON(it gjson.Result) (Event, verdict, error) {
	if !it.IsObject() {
		return Event{}, 0, errors.New("an item is not an object")
	}
	ref := it.Get("objectRef")
	verb := it.Get("verb").String()
	id := it.Get("auditID").String()
	if it.Get("stage").String() != "ResponseComplete" || !WriteVerbs[verb] || !ref.IsObject() || ref.Get("resource").String() == "" || id == "" {
		return Event{}, notWrite, nil
	}
	code := int32(it.Get("responseStatus.code").Int())
	if code < 200 || code > 299 {
		return Event{}, refused, nil
	}
	if isDryRun(it.Get("requestURI").String()) {
		return Event{}, dryRun, nil
	}
	requested, err := microTime(it.Get("requestReceivedTimestamp"))
	if err != nil {
		return Event{}, 0, err
	}
	completed, err := microTime(it.Get("stageTimestamp"))
	if err != nil {
		return Event{}, 0, err
	}
	user := it.Get("user")
	e := Event{
		AuditID: id, Verb: verb,
		Group: ref.Get("apiGroup").String(), Resource: ref.Get("resource").String(), Subresource: ref.Get("subresource").String(),
		Namespace: ref.Get("namespace").String(), Name: ref.Get("name").String(), ObjectUID: ref.Get("uid").String(),
		Username: user.Get("username").String(), UserUID: user.Get("uid").String(), Groups: strings_(user.Get("groups")),
		UserAgent: it.Get("userAgent").String(), SourceIPs: strings_(it.Get("sourceIPs")), Code: code,
		RequestReceived: requested, StageTimestamp: completed,
	}
	if u := it.Get("impersonatedUser"); u.IsObject() && u.Get("username").String() != "" {
		e.Impersonator = e.Username
		e.Username, e.UserUID, e.Groups = u.Get("username").String(), u.Get("uid").String(), strings_(u.Get("groups"))
	}
	if resp := it.Get("responseObject"); resp.IsObject() {
		readResponse(&e, resp)
	}
	return e, kept, nil
}

// readResponse takes the response object's metadata (never its content) into e.
func readResponse(e *Event, resp gjson.Result) {
	kind := resp.Get("kind").String()
	switch {
	case kind == "Status":
		e.ResponseUID = resp.Get("details.uid").String()
	case strings.HasSuffix(kind, "List"):
		for _, u := range resp.Get("items.#.metadata.uid").Array() {
			e.DeletedUIDs = append(e.DeletedUIDs, u.String())
		}
	default:
		meta := resp.Get("metadata")
		e.ResponseUID = meta.Get("uid").String()
		if rv, err := strconv.ParseUint(meta.Get("resourceVersion").String(), 10, 64); err == nil {
			e.ResponseRV = rv
		}
		if e.Name == "" {
			e.Name = meta.Get("name").String()
		}
	}
}

func strings_(r gjson.Result) []string {
	if !r.IsArray() {
		return nil
	}
	a := r.Array()
	out := make([]string, len(a))
	for i, v := range a {
		out[i] = v.String()
	}
	return out
}

// microTime parses a metav1.MicroTime (RFC 3339 with microseconds); absent is zero.
func microTime(r gjson.Result) (time.Time, error) {
	if !r.Exists() || r.Type == gjson.Null || r.String() == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, r.String())
	if err != nil {
		return time.Time{}, fmt.Errorf("a timestamp: %w", err)
	}
	return t, nil
}
