package main

import (
	"context"
	"fmt"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

// checkIdentity reports the cluster's identity as run reads it (the kube-system
// namespace's uid), which every PostgreSQL checkpoint carries to find a cluster rebuilt
// under the same name. Without it run still streams, relying on resource versions alone:
// a warning, not a failure.
func checkIdentity(ctx context.Context, src *kubeSource, t *table) {
	uid, err := source.ClusterIdentity(ctx, src.clients)
	switch {
	case err != nil:
		t.row("cluster identity", "warn", fmt.Sprintf("cannot read the kube-system namespace (%s); a cluster rebuilt under the same name is found only by its resource versions (grant list on namespaces)", err))
	case uid == "":
		t.row("cluster identity", "warn", "no kube-system namespace; a cluster rebuilt under the same name is found only by its resource versions")
	default:
		t.row("cluster identity", "ok", "kube-system uid "+uid)
	}
}

// checkDeadLetters reports, for a Kafka sink, each resource's dead-letter topic (where a
// record too large for its data topic goes): there, or created on the first quarantined
// change (createTopics), or missing, when such a change would be in the log only (a
// warning: the stream still goes on).
func checkDeadLetters(ctx context.Context, cfg *config.Config, sc config.Sink, resources []change.Resource, t *table) {
	for _, res := range resources {
		what := "dead-letter " + sc.Name + " " + res.ID()
		topic, exists, err := kafka.DeadLetterTopicExists(ctx, cfg.Cluster, *sc.Kafka, res)
		switch {
		case err != nil:
			t.result(what, err, "")
		case exists:
			t.row(what, "ok", "topic "+topic)
		case sc.Kafka.CreateTopics:
			t.row(what, "ok", "topic "+topic+" is created on the first quarantined change (createTopics)")
		default:
			t.row(what, "warn", "topic "+topic+" does not exist and createTopics is false: a quarantined change would be in the log only")
		}
	}
}
