// Package resolved keeps a sink's resolved watermarks and emits them at an interval:
// "every change of resource R (one scope of it) up to resource version X, in epoch E, is
// in this sink" — CockroachDB's resolved timestamps, in resource versions.
//
// A sink calls Emitter.Committed with each batch only after the batch is durable (the
// brokers acknowledged every record, the lines were written) and its checkpoint
// committed: the batch's checkpoint is then the resource's watermark, since the pipeline
// never hands a sink a checkpoint past a change that is not in that batch or an earlier
// one (package pipeline). Batches without changes (watch bookmarks, the end of a relist)
// move it too, so a quiet resource's watermark advances about as often as the apiserver
// sends bookmarks. Emitter.Run emits, once per interval, the watermarks that moved since
// they were last emitted (none when nothing moved), through the sink's own writer; one
// that fails is emitted again at the next tick. A watermark of RV 0 (a new epoch's relist
// under way) is never emitted.
//
// The wire form (Append) is the same JSON for every sink (docs/contract.md, "Resolved
// watermarks"):
//
//	{"op":"resolved","cluster":"prod","sink":"stream","group":"apps","resource":"deployments",
//	 "scope":"","resolvedRV":"12345","epoch":0,"time":"2025-01-02T03:04:05.678Z"}
package resolved
