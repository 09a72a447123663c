package config

import (
	"os"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/audit"
	"github.com/kube-cdc/kube-cdc/internal/checkpoint"
	"github.com/kube-cdc/kube-cdc/internal/pipeline"
	"github.com/kube-cdc/kube-cdc/internal/sinks/kafka"
	"github.com/kube-cdc/kube-cdc/internal/sinks/postgres"
	"github.com/kube-cdc/kube-cdc/internal/sinks/stdout"
)

// Defaults of the keys outside lists, as koanf key paths. Where a package owns a default
// (its options' Default… constants) this reads it rather than copying the literal; the
// kubernetes and leaderElection keys are spelled out here because the packages behind
// them (source, leader) import client-go, which config must not:
// cmd/kube-cdc/defaults_test.go holds those that the packages default too
// (source.DefaultPageSize, source.ListAuto, leader.DefaultLeaseDuration, …) to the
// packages' constants.
func defaults() map[string]any {
	identity, _ := os.Hostname()
	return map[string]any{
		"cluster":                      "default",
		"kubernetes.kubeconfig":        "",
		"kubernetes.context":           "",
		"kubernetes.qps":               50.0,
		"kubernetes.burst":             100,
		"kubernetes.compression":       false,
		"kubernetes.pageSize":          500,
		"kubernetes.listMode":          "auto",
		"kubernetes.relistJitter":      5 * time.Second,
		"transforms.redactSecrets":     true,
		"pipeline.batchSize":           pipeline.DefaultBatchSize,
		"pipeline.batchBytes":          pipeline.DefaultBatchBytes,
		"pipeline.maxWait":             pipeline.DefaultMaxWait,
		"pipeline.buffer":              pipeline.DefaultBuffer,
		"pipeline.detachAfter":         pipeline.DefaultDetachAfter,
		"pipeline.resync":              time.Duration(0),
		"metrics.address":              DefaultMetricsAddress,
		"log.level":                    "info",
		"log.format":                   "text",
		"log.progressInterval":         pipeline.DefaultProgressInterval,
		"leaderElection.enabled":       false,
		"leaderElection.namespace":     "default",
		"leaderElection.name":          "kube-cdc",
		"leaderElection.identity":      identity,
		"leaderElection.leaseDuration": 15 * time.Second,
		"leaderElection.renewDeadline": 10 * time.Second,
		"leaderElection.retryPeriod":   2 * time.Second,

		// The access check asks whether each streamed resource may still be read.
		"kubernetes.accessCheckInterval": time.Minute,

		// The audit receiver (audit.go): off until audit.webhook.listen is set.
		"audit.webhook.listen":       "",
		"audit.webhook.tlsCertFile":  "",
		"audit.webhook.tlsKeyFile":   "",
		"audit.webhook.clientCAFile": "",
		"audit.webhook.tokenFile":    "",
		"audit.webhook.maxBodyBytes": int64(audit.DefaultMaxBodyBytes),
		"audit.webhook.maxInFlight":  audit.DefaultMaxInFlight,
		"audit.sink":                 "",
		"audit.wait":                 time.Duration(0),
		"audit.actorsTopic":          kafka.DefaultActorsTopic,
		"audit.logFile.path":         "",
		"audit.logFile.pollInterval": time.Second,
		"audit.statsInterval":        time.Minute,
		"audit.statsWindow":          5 * time.Minute,
	}
}

// resourceDefaults are the defaults of one resources[] element, nested as in the file.
func resourceDefaults() map[string]any {
	return map[string]any{"history": map[string]any{"ignorePaths": []any{}, "defaultIgnorePaths": true}}
}

// sinkDefaults are the defaults of one sink of type typ, nested as in the file. Filling
// the raw map rather than the decoded struct lets a file set a default-true bool (migrate)
// to false.
func sinkDefaults(typ string) map[string]any {
	switch typ {
	case SinkPostgres:
		return map[string]any{
			"postgres": map[string]any{
				"schema":     postgres.DefaultSchema,
				"migrate":    postgres.DefaultMigrate,
				"hardDelete": false,
				"retention":  time.Duration(0),
				"maxConns":   postgres.DefaultMaxConns,
				// Migration 012: monthly changes partitions kept created ahead.
				"partitionsAhead":      postgres.DefaultPartitionsAhead,
				"retentionByPartition": false,
				// Migration 017: a watch update's changed paths stored as it is written.
				"changedPaths": postgres.ChangedPathsWrite,
				// Migration 019: Kubernetes Events in their own table, kept a day.
				"events": map[string]any{"table": true, "retention": postgres.DefaultEventsRetention},
			},
		}
	case SinkKafka:
		return map[string]any{
			"kafka": map[string]any{
				"topic":             kafka.DefaultTopic,
				"partitions":        kafka.DefaultPartitions,
				"replicationFactor": kafka.DefaultReplicationFactor,
				"compression":       kafka.DefaultCompression,
				"batchTimeout":      kafka.DefaultBatchTimeout,
				"writeTimeout":      kafka.DefaultWriteTimeout,
				"maxMessageBytes":   0, // what the brokers accept
				"deadLetterTopic":   kafka.DefaultDeadLetterTopic,
				"resolvedInterval":  time.Duration(0), // no resolved records
				"resolvedTopic":     kafka.DefaultResolvedTopic,
			},
			"checkpoint": checkpointDefaults(kafka.DefaultCheckpointType, checkpoint.DefaultFlushInterval),
		}
	case SinkStdout:
		return map[string]any{
			"stdout":     map[string]any{"resolvedInterval": time.Duration(0)},
			"checkpoint": checkpointDefaults(stdout.DefaultCheckpointType, 0), // each commit durable: see validateCheckpoint
		}
	}
	return nil
}

func checkpointDefaults(typ string, flushInterval time.Duration) map[string]any {
	return map[string]any{"type": typ, "path": checkpoint.DefaultPath, "topic": kafka.DefaultOffsetsTopic, "flushInterval": flushInterval}
}

// fillDefaults sets every key of def that m lacks (or holds null), recursing into maps.
func fillDefaults(m, def map[string]any) {
	for k, dv := range def {
		cur, ok := m[k]
		if !ok || cur == nil {
			if dm, isMap := dv.(map[string]any); isMap {
				nm := map[string]any{}
				fillDefaults(nm, dm)
				m[k] = nm
			} else {
				m[k] = dv
			}
			continue
		}
		if dm, isMap := dv.(map[string]any); isMap {
			if cm, ok := cur.(map[string]any); ok {
				fillDefaults(cm, dm)
			}
		}
	}
}
