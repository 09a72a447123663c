// Package envelope encodes a change as the Debezium-style JSON envelope of docs/contract.md, "Kafka records" (a
// contract): the Kafka record value and the stdout sink's line.
//
//	{"op":"c|u|d|r","ts_ms":…,"before":…,"after":…,"source":{"cluster",…,"changedBy"}}
//
// The envelope is built by appending bytes: Change.Object is already JSON and is copied in
// verbatim, never decoded (decoding costs more CPU per event than everything else the
// pipeline does, docs/contract.md "Performance notes"). Encode once, before any retry.
package envelope
