// Package status is what `kube-cdc status` shows (docs/operations.md, "kube-cdc status"):
// per sink, resource and scope, the checkpoint, its age and epoch, the object counts and
// the quarantined changes; who writes each PostgreSQL sink; and, asked of the running
// kube-cdc at metrics.address (AskDaemon), the resources it does not stream now. Read
// gathers it into a Report, and Write prints the report as a table, or as JSON or YAML
// with field names that are a contract for scripts.
//
// The package reads the sinks and their checkpoint stores itself; the command resolves
// the configured resources (Target) and the scopes' content, which need the cluster's
// discovery, and hands them in.
package status
