package deliver

import (
	"context"
	"strconv"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
)

// Topic is the actors topic (kafka.ActorsWriter): Write returns once every record is
// acknowledged.
type Topic interface {
	Write(ctx context.Context, records []kafka.ActorRecord) error
}

// TopicFirst writes each batch to Topic, then to the audit store: Events for the
// receiver's batches, Positions for a log file's batches with the position after them.
// A batch answered without error is in both.
type TopicFirst struct {
	Topic     Topic
	Events    audit.Store
	Positions audit.PositionStore // nil when no log file is read
}

// Store writes events to the topic, then to Events.
func (t TopicFirst) Store(ctx context.Context, events []audit.Event) error {
	if err := t.Topic.Write(ctx, Records(events)); err != nil {
		return err
	}
	return t.Events.Store(ctx, events)
}

// Position is Positions' position of the log file at path.
func (t TopicFirst) Position(ctx context.Context, path string) (audit.Position, error) {
	return t.Positions.Position(ctx, path)
}

// StoreAt writes events to the topic, then stores them with pos in Positions: a position
// is stored only once its events are in both.
func (t TopicFirst) StoreAt(ctx context.Context, events []audit.Event, path string, pos audit.Position) error {
	if err := t.Topic.Write(ctx, Records(events)); err != nil {
		return err
	}
	return t.Positions.StoreAt(ctx, events, path, pos)
}

// Records are events as the actors topic carries them: the uid the response named (else
// the request's), the response's resourceVersion as a string ("" when it carried none),
// and the time the write completed.
func Records(events []audit.Event) []kafka.ActorRecord {
	out := make([]kafka.ActorRecord, len(events))
	for i, e := range events {
		uid := e.ResponseUID
		if uid == "" {
			uid = e.ObjectUID
		}
		rv := ""
		if e.ResponseRV > 0 {
			rv = strconv.FormatUint(e.ResponseRV, 10)
		}
		out[i] = kafka.ActorRecord{Group: e.Group, Resource: e.Resource, Subresource: e.Subresource, Namespace: e.Namespace,
			Name: e.Name, Verb: e.Verb, UID: uid, RV: rv, DeletedUIDs: e.DeletedUIDs, User: e.Username,
			Impersonator: e.Impersonator, UserAgent: e.UserAgent, AuditID: e.AuditID,
			Requested: e.RequestReceived, Completed: e.StageTimestamp}
	}
	return out
}
