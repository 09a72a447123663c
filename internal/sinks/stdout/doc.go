// Package stdout is the embedded default sink: one JSON line per change, in the same
// Debezium-style envelope as the Kafka sink's record values (package envelope;
// docs/contract.md, "Kafka records"), written to an io.Writer (standard output in
// kube-cdc run).
//
// Delivery is at least once, ordered per resource (docs/guarantees.md). A delete is
// one line with op "d" and the last state in "before"; there is no tombstone line. With a
// checkpoint store the sink resumes where it stopped; without one it relists and writes a
// snapshot at every start.
//
// With Options.ResolvedInterval set, resolved lines go between the change lines: at most
// one per resource (scope) per interval, when its watermark moved, saying that every
// change line of that resource up to resolvedRV (in epoch) was printed above it
// (package resolved; docs/contract.md, "Resolved watermarks"). Their "op" is
// "resolved", so a consumer of change lines skips them by op.
package stdout
