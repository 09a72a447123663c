// Package integration holds the in-process integration tests: the pipeline, the source
// and the sinks wired together as cmd/kube-cdc wires them, against a real kube-apiserver
// + etcd, PostgreSQL and a Kafka-protocol broker on loopback (internal/testenv). They are
// the tests that need a layer above the one they are about (a sink's behaviour fed by the
// real source through the pipeline, or the pipeline's behaviour written into a real sink),
// so they live here and not in the unit packages, whose tests test their own package
// (internal/layout checks it). Unlike e2e/ they do not run the built binary.
//
// TestMain starts one PostgreSQL server; every test gets a database of its own and a
// control plane of its own (testenv.NewKube), since they create namespaces with fixed
// names. The tests run one at a time: each starts an apiserver.
package integration
