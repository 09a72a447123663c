package deliver

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
)

// journal records, in order, what the fakes below were asked to do.
type journal struct{ calls []string }

type fakeTopic struct {
	j   *journal
	err error
}

func (f fakeTopic) Write(_ context.Context, rs []kafka.ActorRecord) error {
	f.j.calls = append(f.j.calls, "topic "+rs[0].AuditID)
	return f.err
}

type fakeStore struct{ j *journal }

func (f fakeStore) Store(_ context.Context, es []audit.Event) error {
	f.j.calls = append(f.j.calls, "store "+es[0].AuditID)
	return nil
}

func (f fakeStore) Position(context.Context, string) (audit.Position, error) {
	return audit.Position{Inode: 1, Offset: 2}, nil
}

func (f fakeStore) StoreAt(_ context.Context, es []audit.Event, path string, _ audit.Position) error {
	f.j.calls = append(f.j.calls, "storeAt "+es[0].AuditID+" "+path)
	return nil
}

func TestTopicFirstWritesTheTopicBeforeTheStoreAndNothingToTheStoreWhenTheTopicFails(t *testing.T) {
	ctx := context.Background()
	events := []audit.Event{{AuditID: "a1", Verb: "update", Resource: "configmaps", Name: "x"}}
	for _, tc := range []struct {
		name     string
		topicErr error
		write    func(TopicFirst) error
		want     []string
	}{
		{"a received batch", nil, func(t TopicFirst) error { return t.Store(ctx, events) }, []string{"topic a1", "store a1"}},
		{"a log file's batch", nil, func(t TopicFirst) error { return t.StoreAt(ctx, events, "/log", audit.Position{}) },
			[]string{"topic a1", "storeAt a1 /log"}},
		{"a received batch the topic refused", errors.New("refused"), func(t TopicFirst) error { return t.Store(ctx, events) },
			[]string{"topic a1"}},
		{"a log file's batch the topic refused", errors.New("refused"),
			func(t TopicFirst) error { return t.StoreAt(ctx, events, "/log", audit.Position{}) }, []string{"topic a1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &journal{}
			tf := TopicFirst{Topic: fakeTopic{j, tc.topicErr}, Events: fakeStore{j}, Positions: fakeStore{j}}
			err := tc.write(tf)
			if (err != nil) != (tc.topicErr != nil) || !errors.Is(err, tc.topicErr) {
				t.Errorf("error %v, want %v", err, tc.topicErr)
			}
			if !reflect.DeepEqual(j.calls, tc.want) {
				t.Errorf("calls %q, want %q", j.calls, tc.want)
			}
		})
	}
}

func TestTopicFirstReadsTheLogPositionFromTheStore(t *testing.T) {
	tf := TopicFirst{Topic: fakeTopic{j: &journal{}}, Positions: fakeStore{&journal{}}}
	if p, err := tf.Position(context.Background(), "/log"); err != nil || p != (audit.Position{Inode: 1, Offset: 2}) {
		t.Fatalf("Position = %v, %v; want the store's {1 2}", p, err)
	}
}

func TestRecordsNameTheResponsesUIDElseTheRequestsAndTheResponseRVAsAString(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := audit.Event{AuditID: "a", Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale",
		Namespace: "ns", Name: "web", Username: "alice", Impersonator: "admin", UserAgent: "kubectl/v1",
		RequestReceived: at, StageTimestamp: at.Add(time.Millisecond)}
	want := kafka.ActorRecord{Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: "ns", Name: "web",
		Verb: "update", User: "alice", Impersonator: "admin", UserAgent: "kubectl/v1", AuditID: "a",
		Requested: at, Completed: at.Add(time.Millisecond)}
	for _, tc := range []struct {
		name    string
		edit    func(*audit.Event)
		uid, rv string
		deleted []string
	}{
		{"the response's uid and RV", func(e *audit.Event) { e.ResponseUID, e.ObjectUID, e.ResponseRV = "resp", "req", 42 }, "resp", "42", nil},
		{"no response object (level Metadata): the request's uid, no RV", func(e *audit.Event) { e.ObjectUID = "req" }, "req", "", nil},
		{"a deletecollection's items", func(e *audit.Event) { e.Verb, e.Name, e.DeletedUIDs = "deletecollection", "", []string{"u1", "u2"} }, "", "", []string{"u1", "u2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := base
			tc.edit(&e)
			w := want
			w.UID, w.RV, w.DeletedUIDs, w.Verb, w.Name = tc.uid, tc.rv, tc.deleted, e.Verb, e.Name
			got := Records([]audit.Event{e})
			if len(got) != 1 || !reflect.DeepEqual(got[0], w) {
				t.Errorf("Records = %+v\nwant      %+v", got, w)
			}
		})
	}
}
