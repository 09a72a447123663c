package check

import (
	"context"
	"io"
	"log/slog"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
)

// Postgres adds the row of the PostgreSQL sink sc (postgres.Check, which changes
// nothing). noise: run gives the sink ignore paths (it writes history_skipped then);
// streamed: the resources run streams, of which Kubernetes Events make it write its
// events table.
func Postgres(ctx context.Context, t *Table, cfg *config.Config, sc config.Sink, noise bool, streamed []change.Resource) {
	o := *sc.Postgres
	o.Noise = noise
	o.StreamsEvents = streamsEvents(streamed)
	detail, err := postgres.Check(ctx, sc.Name, cfg.Cluster, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Result("sink "+sc.Name, err, detail)
}

// streamsEvents reports whether a resource is Kubernetes Events (core/v1 or
// events.k8s.io/v1), which a PostgreSQL sink writes to its events table.
func streamsEvents(resources []change.Resource) bool {
	for _, r := range resources {
		if r.Resource == "events" && (r.Group == "" || r.Group == "events.k8s.io") {
			return true
		}
	}
	return false
}

// DeadLetters reports, for a Kafka sink, each resource's dead-letter topic (where a
// record too large for its data topic goes): there, or created on the first quarantined
// change (createTopics), or missing, when such a change would be in the log only (a
// warning: the stream still goes on).
func DeadLetters(ctx context.Context, t *Table, cfg *config.Config, sc config.Sink, resources []change.Resource) {
	for _, res := range resources {
		what := "dead-letter " + sc.Name + " " + res.ID()
		topic, exists, err := kafka.DeadLetterTopicExists(ctx, cfg.Cluster, *sc.Kafka, res)
		switch {
		case err != nil:
			t.Result(what, err, "")
		case exists:
			t.Row(what, "ok", "topic "+topic)
		case sc.Kafka.CreateTopics:
			t.Row(what, "ok", "topic "+topic+" is created on the first quarantined change (createTopics)")
		default:
			t.Row(what, "warn", "topic "+topic+" does not exist and createTopics is false: a quarantined change would be in the log only")
		}
	}
}
