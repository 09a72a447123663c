// Package pipeline connects sources to sinks: one stream (List+Watch) per resource feeds
// one cursor per sink; each cursor batches, writes, and advances its sink's checkpoint
// only after the sink acknowledged (cursor.go). During a relist, its reconcile diff
// (reconcile.go) compares the LIST with what the sink holds and decides what the cursor
// writes; requested relists (resync.go) and progress lines (progress.go) hang off it.
//
//	stream ──events──► fan-out ──► cursor(sink A) ──Batch──► A.Write (rows + checkpoint)
//	                          └──► cursor(sink B) ──Batch──► B.Write
//
// To see it run, read Example (example_test.go): a scripted Target (a relist, then watch
// changes) streamed into an in-memory Sink that implements the five methods of sink.go,
// printing what the sink holds and its checkpoint. Real targets come from internal/source
// (source.Feed), real sinks from internal/sinks/..., which internal/sinks/sinktest checks.
//
// Guarantees this package provides (docs/guarantees.md, docs/architecture.md):
//   - Per resource, changes reach each sink in watch order; a batch is written whole or
//     retried whole (sinks are idempotent), and the checkpoint a batch carries never
//     passes a change that is not in that batch or an earlier one.
//   - Backpressure: a slow sink slows the stream; nothing is dropped. With several sinks,
//     a sink whose queue stays full for DetachAfter (say, a stopped broker) is detached
//     from the shared stream so the others keep going; once its queue is written, it
//     resumes from its own checkpoint on a stream of its own (a watch from that RV, or a
//     relist and reconcile diff if the history is gone).
//   - After every relist the reconcile diff compares the listed set with its sink's key
//     index: unchanged objects emit nothing, changed ones an upsert, and keys the sink
//     holds (and the target owns) that the list lacks are looked up in the cluster
//     (Target.Lookup): an inferred delete at the LIST's RV, with reason "gone" or
//     "out-of-scope", for what is gone or in no configured scope; nothing for an object
//     another scope streams. A listed key held under another uid gets the old uid's
//     inferred delete (reason "recreated", at the new RV minus one) before the new uid's
//     create.
//   - Time travel (an etcd restore, a rebuilt cluster): a relist below the checkpoint, or
//     showing an object older than the sink holds, starts a new epoch (reconcileDiff.travel,
//     cursor.apply); at start, one found in any resource of a sink relists all of that
//     sink's resources in a new epoch (travel.go). Versions order by (epoch, RV) in every
//     sink.
//   - A stream that ends with a Fault degrades its resource alone; it is streamed again
//     after a capped backoff (degraded.go). Any other error stops the pipeline.
//   - Batching is adaptive (group commit): a change that finds its sink idle is written at
//     once; while a write is in flight the next batch fills, and goes out as soon as that
//     write completes. Batches are also cut by count and bytes; a relist's only so, and
//     at 500 changes while the sink is idle (its writes then start after one LIST page).
//     MaxWait (default 0) makes an idle sink's batch wait to fill. Under load one batch is
//     written while the next fills (never two writes at once), so reading overlaps
//     writing; a batch flushed because the sink was idle and the queue empty is written in
//     the cursor's goroutine (no hand-off). A stream's own events (bookmarks) advance the
//     checkpoint without data.
//   - On shutdown (ctx done) the stream stops, every queued event is written, and the
//     checkpoints committed, within FlushTimeout — unless Options.Abandon says the cause
//     forbids writing (a lost lease): then writes stop at once, and what was not written
//     is read again, from the checkpoint, by whoever streams next.
//
// Readiness (Pipeline.Ready): a cursor is live once its stream says it is established
// (change.Established: the watch from the point the stream started proved good) and what
// the stream delivered before is committed; a checkpoint alone is not enough.
//
// The key index is loaded from the sink for the duration of a relist only: steady state
// keeps no per-object state in memory at all.
package pipeline
