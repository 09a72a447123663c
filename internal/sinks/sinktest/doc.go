// Package sinktest is the conformance suite every sink passes, in the spirit of Conduit's
// connector acceptance test: Run writes batches through the sink contract alone (Write,
// or Prepare where the sink has it; Checkpoint; KeyIndex; Close), and checks what the sink
// then durably holds against the contract docs/guarantees.md's table promises:
//
//   - a written batch is in the key index and the checkpoint;
//   - writing a batch again (a retry whose outcome was unknown) changes neither;
//   - replaying an older batch neither undoes newer versions nor moves the checkpoint back;
//   - a batch without changes (a bookmark) still moves the checkpoint;
//   - deleted keys, observed or inferred, leave the key index;
//   - the key index holds each key's uid, and an object recreated under its name (a new
//     uid) is deleted under the old uid before it is created under the new one, and ends
//     live with the new uid;
//   - a write that fails part-way leaves the checkpoint where it was, and writing the same
//     batch again afterwards completes it, every record there and in per-key order;
//   - after a restart (Close, open again on the same durable state) the checkpoint and key
//     index read back as they were, and writing goes on from there.
//
// A sink's test supplies a Harness: how to open the sink on fresh or surviving state, how
// to read back the records it holds, and how to make one write fail part-way. To write
// one, start from Example_runTheSuite (example_test.go): the stdout sink on a file store,
// with an output that can break part-way, handed to Run from the sink's own test.
//
// sinktest imports neither the pipeline nor the source: the small interfaces it needs are
// declared here, as every consumer in this project does.
package sinktest
