// Package e2e holds kube-cdc's end-to-end tests: the built binary against a real
// kube-apiserver + etcd, PostgreSQL and a Kafka-protocol broker, all on loopback
// (internal/testenv). They assert what users see: rows, records, exit codes, messages.
package e2e
