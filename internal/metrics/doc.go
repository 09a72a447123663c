// Package metrics is kube-cdc's Prometheus instrumentation and its HTTP endpoint
// (docs/contract.md, "CLI and configuration"): /metrics, /healthz and /readyz on one listener.
//
// There is no global state: New registers every series on its own registry (plus the Go
// and process collectors), so tests and several pipelines in one process never collide.
// Every method is safe on a nil *Metrics, so code under test can pass nil instead of
// building a registry it never reads.
//
// Every series is prefixed kube_cdc_. The ones worth alerting on: kube_cdc_lag_seconds
// (event received → sink acknowledged), rate(kube_cdc_relists_total) and
// rate(kube_cdc_gone_total) (410 storms), kube_cdc_sink_errors_total{class="terminal"},
// time() - kube_cdc_checkpoint_timestamp_seconds (checkpoint age) and
// kube_cdc_degraded_resources (resources that do not stream, each named with its reason
// by kube_cdc_resource_degraded). docs/operations.md has the PromQL.
//
// Besides /metrics, /healthz and /readyz, the endpoint serves /resources: the degraded
// resources as JSON, which `kube-cdc status` asks the running daemon for; and
// /checkpoints/{sink}: a copy of a sink's checkpoint file this process holds, to
// loopback clients only (ServeCheckpointFile), which status reads beside the daemon.
package metrics
