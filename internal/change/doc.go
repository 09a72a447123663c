// Package change is kube-cdc's change model: the values that flow from a source through
// the pipeline to every sink (docs/contract.md, "Change log").
//
// A Change is one observed (or inferred) state transition of one Kubernetes object, keyed by
// (resource, namespace, name) and ordered per key by resource version. A Batch is an ordered
// run of changes of one resource together with the checkpoint that becomes durable when a
// sink acknowledges the batch.
//
// This package depends on nothing else in the project; sources produce these values and
// sinks consume them, so it holds only types and the small pure functions on them.
package change
