// Package testenv starts real servers for kube-cdc's tests on free loopback ports and
// stops them when the test (or the package's TestMain) ends: etcd + kube-apiserver
// (kube*.go), PostgreSQL (postgres.go) and a Kafka-protocol broker (kafka.go).
//
// A bare Kube has no controllers, scheduler or nodes: fast, and right for tests that write
// their own objects. Cluster mode (NewCluster, kube_cluster.go) adds kube-controller-manager,
// kube-scheduler and KWOK simulating nodes and pod lifecycles, with workload helpers
// (kube_workload.go: nodes, Deployments rolled out, scaled and deleted, a wait until the
// cluster settles), for tests and benchmarks that need the changes a real cluster makes.
//
// Auditing (kube_audit.go): KubeOptions.Audit starts the apiserver with an audit policy and
// the webhook backend in batch mode (a short batch wait, so tests see events quickly;
// AuditWebhook.RetryFor: how long the apiserver re-sends a batch the receiver failed);
// NewAuditTLS makes the receiver's serving and the apiserver's client certificates. Every
// Kube knows three people by static tokens (TokenUsers, TokenUser), who may impersonate;
// ClusterOptions.ServiceAccountCredentials runs each controller as its own ServiceAccount.
//
// Every server keeps its log in a file; on failure the tail is printed. A missing
// prerequisite fails the test with a message saying how to get it: nothing is skipped.
//
// Start-up costs seconds, so share one environment per test package where tests do not
// interfere: start it in TestMain with the Start* functions, and give each test its own
// namespace, database or topic. A database every test prepares alike (migrated) is
// prepared once in a Template (Postgres.NewTemplate) and copied per test. A private
// server's test databases are not dropped: a test's end ends its connections, and Stop
// removes the server with its databases.
package testenv
