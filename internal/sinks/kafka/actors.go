package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// DefaultActorsTopic is the actors topic's default name template ({cluster} expanded).
const DefaultActorsTopic = "kube.{cluster}.actors"

// ActorRecord is one audit event as the actors topic carries it: who made a write, and the
// object and resourceVersion it wrote, so a consumer joins it to the data topics' records
// by key and resourceVersion (or, for a delete answered with a Status, by uid) whenever
// either arrives.
type ActorRecord struct {
	Group        string    `json:"group"`
	Resource     string    `json:"resource"`
	Subresource  string    `json:"subresource,omitempty"`
	Namespace    string    `json:"namespace"`
	Name         string    `json:"name"`
	Verb         string    `json:"verb"`
	UID          string    `json:"uid,omitempty"`             // the response's (or the request's) uid
	RV           string    `json:"resourceVersion,omitempty"` // the response's; "" when it carried none
	DeletedUIDs  []string  `json:"deletedUIDs,omitempty"`     // a deletecollection's items
	User         string    `json:"user"`
	Impersonator string    `json:"impersonator,omitempty"`
	UserAgent    string    `json:"userAgent"`
	AuditID      string    `json:"auditID"`
	Requested    time.Time `json:"requestReceivedTimestamp"`
	Completed    time.Time `json:"stageTimestamp"`
}

// ActorsWriter writes ActorRecords to the actors topic of a Kafka sink's brokers (its TLS and
// SASL), keyed like the data topics ("namespace/name", "name" when cluster-scoped, so a
// consumer's partitioning of both agrees), acknowledged by all in-sync replicas. The
// audit receiver writes through it on every replica, before it answers the apiserver.
type ActorsWriter struct {
	w      *kafka.Writer
	client *kafka.Client
	topic  string
	opts   Options
	ready  bool
}

// NewActorsWriter returns a writer to the topic template names ({cluster} expanded;
// "": DefaultActorsTopic), created like the data topics (compacted) when opts say so.
func NewActorsWriter(cluster, template string, opts Options) (*ActorsWriter, error) {
	opts = opts.withDefaults()
	if template == "" {
		template = DefaultActorsTopic
	}
	tr, err := NewTransport(opts)
	if err != nil {
		return nil, err
	}
	topic := strings.ReplaceAll(template, "{cluster}", cluster)
	return &ActorsWriter{
		topic: topic, opts: opts,
		client: &kafka.Client{Addr: kafka.TCP(opts.Brokers...), Transport: tr, Timeout: opts.WriteTimeout},
		w: &kafka.Writer{
			Addr: kafka.TCP(opts.Brokers...), Topic: topic, Transport: tr,
			Balancer:     &kafka.Hash{}, // the data topics' partitioner: per key order
			RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond, // kafka-go's 1 s default would delay every batch
			BatchSize:    1000,
			WriteTimeout: opts.WriteTimeout,
		},
	}, nil
}

// Topic is the actors topic's name.
func (a *ActorsWriter) Topic() string { return a.topic }

// Write writes actors and returns once the brokers acknowledged every one.
func (a *ActorsWriter) Write(ctx context.Context, actors []ActorRecord) error {
	if len(actors) == 0 {
		return nil
	}
	if !a.ready {
		if _, err := ensureTopic(ctx, a.client, kafka.TopicConfig{
			Topic: a.topic, NumPartitions: a.opts.Partitions, ReplicationFactor: a.opts.ReplicationFactor,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
		}, a.opts.CreateTopics); err != nil {
			return err
		}
		a.ready = true
	}
	msgs := make([]kafka.Message, len(actors))
	for i, ac := range actors {
		v, err := json.Marshal(ac)
		if err != nil {
			return err
		}
		key := ac.Name
		if ac.Namespace != "" {
			key = ac.Namespace + "/" + ac.Name
		}
		msgs[i] = kafka.Message{Key: []byte(key), Value: v, Time: ac.Completed, Headers: []kafka.Header{
			{Key: HeaderOp, Value: []byte("actor")}, {Key: HeaderRV, Value: []byte(ac.RV)},
			{Key: HeaderResource, Value: []byte(resourceID(ac.Group, ac.Resource))},
		}}
	}
	if err := a.w.WriteMessages(ctx, msgs...); err != nil {
		return classify(fmt.Errorf("write %d records to the actors topic %s: %w", len(msgs), a.topic, err))
	}
	return nil
}

// Close closes the writer's connections.
func (a *ActorsWriter) Close() error { return a.w.Close() }

func resourceID(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}
