// Package keyindex holds a sink's key index while a relist is reconciled against it:
// (namespace, name) → (uid, RV, epoch, drifted) for every object the sink holds live.
//
// It is the only state kube-cdc keeps per object, and only while a relist is under way
// (informer-based tools keep every object whole, always), so it is what a relist of a
// large cluster costs in memory. The index is built once (Add, then Seal), then each
// listed object is taken out (Take) and what no LIST showed is Left.
//
// Contract:
//   - Take returns what the last Add of the key said, once: a second Take of the same key
//     says it is absent, as a map delete would.
//   - Left returns every entry not taken, with its uid, RV, epoch and drift exactly as
//     added (uids that are not canonical UUIDs, and empty ones, included).
//   - Memory: an entry is 48 bytes, 4 more for the sorted order, plus its name's bytes
//     (namespaces are held once, uids as 16 bytes, names back to back in 64 KiB chunks);
//     nothing in the entries is a pointer, so the garbage collector does not scan them.
//     Entries and names are stored in fixed-size chunks: loading never copies what it
//     holds, so the peak while loading is the index itself. See docs/benchmarks.md.
//
// An Index is not safe for concurrent use: the cursor that reconciles owns it.
package keyindex
