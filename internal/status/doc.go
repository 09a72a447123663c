// Package status is what `kube-cdc status` shows (docs/operations.md, "kube-cdc status"):
// per sink, resource and scope, the checkpoint, its age and epoch, the object counts and
// the quarantined changes; who writes each PostgreSQL sink; and, asked of the running
// kube-cdc at metrics.address (AskDaemon), the resources it does not stream now. Read
// gathers it into a Report, and Write prints the report as a table, or as JSON or YAML
// with field names that are a contract for scripts.
//
// It writes nothing and takes no lock a writer needs, since it runs beside the daemon: a
// PostgreSQL sink is read through the read store (internal/read/store, read-only
// sessions), a kafka store without creating its offsets topic, and a file store
// read-only, or, while the running kube-cdc holds it, through the consistent copy that
// kube-cdc serves at metrics.address (filestore.go).
//
// The command hands in what needs the cluster or a sink's own code: the configured
// resources (ScopedResource) and the scopes' content, which need discovery, and the PostgreSQL
// stores and the audit join's counts (Stores). It stays outside internal/read because it
// reads every kind of sink's checkpoints (Kafka topics, files), not only the schema.
package status
