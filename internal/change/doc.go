// Package change is kube-cdc's change model: the values that flow from a source through
// the pipeline to every sink (docs/contract.md, "Change log").
//
// A Change is one observed (or inferred) state transition of one Kubernetes object, keyed by
// (resource, namespace, name) and ordered per key by resource version. A Batch is an ordered
// run of changes of one resource together with the checkpoint that becomes durable when a
// sink acknowledges the batch.
//
// Reading it as a tutorial, in the order a newcomer meets the values (example_test.go):
//
//   - a Key names an object within a resource: ExampleParseKey;
//   - an RV is a resourceVersion compared as an integer: ExampleParseRV;
//   - a Version is (epoch, RV), the order of versions across time travels:
//     ExampleVersion_Compare, ExampleParseVersion;
//   - an Event stream is what a source emits, a relist then a watch: ExampleEvent;
//   - a Presence is what a relist's lookup found under a key the LIST lacked, and its
//     End the reason of the inferred delete: ExamplePresence_End;
//   - an Actor is who made a change, from the apiserver's audit events: the one type the
//     audit store, the envelope and `kube-cdc history` pass it in.
//
// This package depends on nothing else in the project; sources produce these values and
// sinks consume them, so it holds only types and the small pure functions on them.
package change
