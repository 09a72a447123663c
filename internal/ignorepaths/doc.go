// Package ignorepaths says which changes of an object are noise to its history: the
// `resources[].history` config keys (docs/reading.md, "Noise control for history").
//
// A path is JSON-Pointer-like (RFC 6901: "/status/conditions", "~1" for a "/" in a key,
// "~0" for a "~") where a segment "*" stands for any one key or array index:
// "/status/conditions/*/lastHeartbeatTime". A path covers itself and everything below it.
//
// The contract: a change of an object whose differences from the previous version of the
// same uid all lie under the resource's ignore paths adds no row to a PostgreSQL sink's
// `changes`; objects, Kafka and stdout still get every version. "/metadata/resourceVersion"
// is ignored whenever any path is (it changes with every version, and the rv column holds
// it). Nodes and leases have default paths (Defaults); a user's paths add to them, and
// `history.defaultIgnorePaths: false` turns them off.
//
// The comparison runs in PostgreSQL, against the objects row the change replaces
// (internal/sinks/postgres), as the expression EqualSQL writes. Three views of one rule,
// checked against each other on random documents (the postgres sink's tests): every path
// changed_paths() lists matches Regexp; the two StripSQLs are equal; EqualSQL is true.
package ignorepaths
