package audit

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func event(fields string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"` +
		fmt.Sprint(len(fields)) + `-id",` + fields + `,"requestReceivedTimestamp":"2026-11-27T05:00:00.000001Z","stageTimestamp":"2026-11-27T05:00:00.002000Z"}`
}

func list(events ...string) string {
	return `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` + strings.Join(events, ",") + `]}`
}

func TestDecodeKeepsCompletedSuccessfulWritesWithWhatTheJoinNeedsOnly(t *testing.T) {
	body := fixtureList()
	got, counts, err := Decode(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Kept: 3, NotWrite: 3, Refused: 2, DryRun: 1}); counts != want {
		t.Errorf("counts %+v, want %+v", counts, want)
	}
	if len(got) != 3 {
		t.Fatalf("kept %d events, want 3: %+v", len(got), got)
	}
	u := got[0]
	if u.Username != "system:serviceaccount:ci:deployer" || u.Impersonator != "dev-a@example.com" ||
		!reflect.DeepEqual(u.Groups, []string{"system:serviceaccounts"}) || u.UserAgent != "kubectl/v1.36.5" ||
		u.ResponseRV != 42 || u.ResponseUID != "u-1" || u.ObjectUID != "u-1" || u.Resource != "secrets" || u.Code != 200 ||
		u.RequestReceived.IsZero() || !u.StageTimestamp.After(u.RequestReceived) {
		t.Errorf("the impersonated update: %+v", u)
	}
	// Nothing of a body survives: Event's fields are all metadata.
	if s := fmt.Sprintf("%+v", got); strings.Contains(s, "c2VjcmV0") || strings.Contains(s, "secret\"") {
		t.Errorf("a body leaked into the events: %s", s)
	}
	if d := got[1]; d.ResponseUID != "u-2" || d.ResponseRV != 0 || d.Verb != "delete" {
		t.Errorf("the delete answered with a Status: %+v", d)
	}
	if dc := got[2]; !reflect.DeepEqual(dc.DeletedUIDs, []string{"u-3", "u-4"}) || dc.ResponseRV != 0 {
		t.Errorf("the deletecollection: %+v", dc)
	}
}

func TestDecodeRefusesWhatIsNotAnEventList(t *testing.T) {
	for _, body := range []string{``, `{`, `[]`, `{"kind":"ConfigMap"}`, `{"items":"no"}`} {
		if _, _, err := Decode(strings.NewReader(body)); err == nil {
			t.Errorf("Decode(%q) = nil error", body)
		}
	}
}

// fixtureList is a batch of every kind of event Decode tells apart.
func fixtureList() string {
	return list(
		// kept: an impersonated update of a Secret, its body read for metadata only
		event(`"stage":"ResponseComplete","verb":"update","requestURI":"/api/v1/namespaces/a/secrets/s",
			"user":{"username":"dev-a@example.com","uid":"1","groups":["devs"]},
			"impersonatedUser":{"username":"system:serviceaccount:ci:deployer","groups":["system:serviceaccounts"]},
			"sourceIPs":["10.0.0.9"],"userAgent":"kubectl/v1.36.5",
			"objectRef":{"resource":"secrets","namespace":"a","name":"s","uid":"u-1","apiVersion":"v1"},
			"responseStatus":{"metadata":{},"code":200},
			"requestObject":{"kind":"Secret","data":{"k":"c2VjcmV0"}},
			"responseObject":{"kind":"Secret","metadata":{"name":"s","uid":"u-1","resourceVersion":"42"},"data":{"k":"c2VjcmV0"}}`),
		// kept: a delete answered with a Status naming the uid only
		event(`"stage":"ResponseComplete","verb":"delete","requestURI":"/api/v1/namespaces/a/configmaps/c",
			"user":{"username":"dev-b@example.com"},"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},
			"responseStatus":{"metadata":{},"code":200},
			"responseObject":{"kind":"Status","apiVersion":"v1","status":"Success","details":{"name":"c","kind":"configmaps","uid":"u-2"}}`),
		// kept: a deletecollection, the deleted items' uids
		event(`"stage":"ResponseComplete","verb":"deletecollection","requestURI":"/api/v1/namespaces/a/configmaps",
			"user":{"username":"dev-c@example.com"},"objectRef":{"resource":"configmaps","namespace":"a"},
			"responseStatus":{"metadata":{},"code":200},
			"responseObject":{"kind":"ConfigMapList","items":[{"metadata":{"uid":"u-3","resourceVersion":"50"}},{"metadata":{"uid":"u-4"}}]}`),
		// refused
		event(`"stage":"ResponseComplete","verb":"update","requestURI":"/api/v1/namespaces/a/configmaps/c",
			"user":{"username":"x"},"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},"responseStatus":{"metadata":{},"code":409}`),
		event(`"stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/a/configmaps",
			"user":{"username":"x"},"objectRef":{"resource":"configmaps","namespace":"a"},"responseStatus":{"metadata":{},"code":403}`),
		// dry run
		event(`"stage":"ResponseComplete","verb":"patch","requestURI":"/api/v1/namespaces/a/configmaps/c?dryRun=All&fieldManager=kubectl",
			"user":{"username":"x"},"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},"responseStatus":{"metadata":{},"code":200},
			"responseObject":{"kind":"ConfigMap","metadata":{"uid":"u-5","resourceVersion":"7"}}`),
		// not writes: a read, another stage, a non-resource request
		event(`"stage":"ResponseComplete","verb":"get","requestURI":"/api/v1/namespaces/a/configmaps/c","user":{"username":"x"},
			"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},"responseStatus":{"metadata":{},"code":200}`),
		event(`"stage":"ResponseStarted","verb":"update","requestURI":"/api/v1/namespaces/a/configmaps/c","user":{"username":"x"},
			"objectRef":{"resource":"configmaps","namespace":"a","name":"c"},"responseStatus":{"metadata":{},"code":200}`),
		event(`"stage":"ResponseComplete","verb":"create","requestURI":"/healthz","user":{"username":"x"},"responseStatus":{"metadata":{},"code":200}`),
	)
}

// Decode reads only the fields it needs; the published types read everything. Both say
// the same of every event.
func TestBothDecodersAgree(t *testing.T) {
	fast, fc, err := Decode(strings.NewReader(fixtureList()))
	if err != nil {
		t.Fatal(err)
	}
	typed, tc, err := decodeTyped(strings.NewReader(fixtureList()))
	if err != nil {
		t.Fatal(err)
	}
	// The published types give times in time.Local and empty lists as nil or empty alike.
	norm := func(es []Event) {
		for i := range es {
			e := &es[i]
			e.RequestReceived, e.StageTimestamp = e.RequestReceived.UTC(), e.StageTimestamp.UTC()
			for _, l := range []*[]string{&e.Groups, &e.SourceIPs, &e.DeletedUIDs} {
				if len(*l) == 0 {
					*l = nil
				}
			}
		}
	}
	norm(fast)
	norm(typed)
	if fc != tc || !reflect.DeepEqual(fast, typed) {
		t.Errorf("fields only: %+v %+v\npublished types: %+v %+v", fc, fast, tc, typed)
	}
	for _, body := range []string{``, `{`, `[]`, `{"kind":"ConfigMap"}`, `{"items":"no"}`} {
		if _, _, err := decodeTyped(strings.NewReader(body)); err == nil {
			t.Errorf("decodeTyped(%q) = nil error", body)
		}
	}
}
