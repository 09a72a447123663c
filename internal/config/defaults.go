package config

import (
	"os"
	"time"
)

// Defaults of the keys outside lists, as koanf key paths.
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
		"transforms.redactSecrets":     true,
		"pipeline.batchSize":           5000,
		"pipeline.batchBytes":          4 << 20,
		"pipeline.maxWait":             10 * time.Millisecond,
		"pipeline.buffer":              256,
		"pipeline.detachAfter":         10 * time.Second,
		"metrics.address":              ":9090",
		"log.level":                    "info",
		"log.format":                   "text",
		"leaderElection.enabled":       false,
		"leaderElection.namespace":     "default",
		"leaderElection.name":          "kube-cdc",
		"leaderElection.identity":      identity,
		"leaderElection.leaseDuration": 15 * time.Second,
		"leaderElection.renewDeadline": 10 * time.Second,
		"leaderElection.retryPeriod":   2 * time.Second,
	}
}

// sinkDefaults are the defaults of one sink of type typ, nested as in the file. Filling
// the raw map rather than the decoded struct lets a file set a default-true bool (migrate)
// to false.
func sinkDefaults(typ string) map[string]any {
	switch typ {
	case SinkPostgres:
		return map[string]any{
			"postgres": map[string]any{
				"schema":     "kube_cdc",
				"migrate":    true,
				"hardDelete": false,
				"retention":  time.Duration(0),
				"maxConns":   4,
			},
		}
	case SinkKafka:
		return map[string]any{
			"kafka": map[string]any{
				"topic":             "kube.{cluster}.{group}.{resource}",
				"partitions":        6,
				"replicationFactor": 1,
				"compression":       "none",
				"batchTimeout":      5 * time.Millisecond,
				"writeTimeout":      10 * time.Second,
			},
			"checkpoint": map[string]any{
				"type":  "file",
				"path":  "kube-cdc-state.db",
				"topic": "kube-cdc.offsets.{cluster}",
			},
		}
	case SinkStdout:
		return map[string]any{
			"stdout": map[string]any{},
			"checkpoint": map[string]any{
				"type":  "none",
				"path":  "kube-cdc-state.db",
				"topic": "kube-cdc.offsets.{cluster}",
			},
		}
	}
	return nil
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
