// Package envelope encodes a change as the Debezium-style JSON envelope of docs/contract.md, "Kafka records" (a
// contract): the Kafka record value and the stdout sink's line.
//
//	{"op":"c|u|d|r","ts_ms":…,"before":…,"after":…,"source":{"cluster",…,"changedBy"}}
//
// The envelope is built by appending bytes: Change.Object is already JSON and is copied in
// verbatim, never decoded (decoding costs more CPU per event than everything else the
// pipeline does, docs/contract.md "Performance notes"). Encode once, before any retry.
//
// AppendWith adds who made the change (a change.Actor: user, impersonator, userAgent,
// auditID) to source when the writer knows it; Actors is what the Kafka and stdout sinks
// ask for it, one entry per change, nil where unknown: the envelope never waits or guesses.
package envelope
