// Package envelope encodes a change as the Debezium-style JSON envelope of design §5 (a
// contract): the Kafka record value and the stdout sink's line.
//
//	{"op":"c|u|d|r","ts_ms":…,"before":…,"after":…,"source":{"cluster",…,"changedBy"}}
//
// The envelope is built by appending bytes: Change.Object is already JSON and is copied in
// verbatim, never decoded (decoding costs more CPU per event than everything else the
// pipeline does, design §8). Encode once, before any retry.
package envelope
