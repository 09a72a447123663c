// Package kafka is the Kafka sink: every change becomes a record on a per-resource topic,
// and the checkpoint moves only after the brokers acknowledged the whole batch.
//
// # Records (a contract: docs/contract.md, "Kafka records")
//
//   - Topic: Options.Topic expanded by TopicName, default "kube.{cluster}.{group}.{resource}"
//     with "core" for the core group, e.g. kube.prod.apps.deployments.
//
//   - Key: "namespace/name", or "name" for cluster-scoped objects. The hash balancer puts
//     one key on one partition, so records of a key are in RV order.
//
//   - Value: a Debezium-style envelope, built by appending bytes (the object is already
//     JSON and is never decoded):
//
//     {"op":"u","ts_ms":1700000000000,"before":null,"after":{…object…},
//     "source":{"cluster":"prod","group":"apps","version":"v1","resource":"deployments",
//     "kind":"Deployment","namespace":"ns","name":"web","uid":"…","resourceVersion":"123",
//     "snapshot":false,"inferred":false,"changedBy":"kubectl/Update"}}
//
//     op is r for snapshot reads (a LIST), c create, u update, d delete. A delete carries
//     the last state in before (null for an inferred delete, which was never observed)
//     and is followed by a second record with the same key and a null value, so log
//     compaction drops the key. before of an update is always null: kube-cdc keeps no
//     object cache. ts_ms and the record timestamp are the change's own time
//     (change.EventTime: the newest time the object itself records, so a re-emit is an
//     exact copy; for a change without one, such as an inferred delete, when kube-cdc
//     observed it; the epoch when neither is known).
//
//   - Headers: kube-cdc.op (the op letter), kube-cdc.rv, kube-cdc.resource (e.g.
//     "deployments.apps"). The tombstone carries them too.
//
// # Delivery
//
// At least once. Write returns only after every record was acknowledged by all in-sync
// replicas and the checkpoint store committed the batch; any failure leaves the checkpoint
// where it was and the pipeline writes the batch again. The file store groups commits
// (checkpoint.flushInterval, default 100ms: one fdatasync pair per interval instead of one
// per batch), so a crash re-emits up to an interval's acknowledged batches beyond the one
// it would have re-emitted anyway; the keys of every record sent are durable in its index
// before the send, and resolved records wait for the flush. Records are a pure function of
// the batch, so a re-emit is byte-identical to the first copy. Consumers dedupe on
// (key, source.resourceVersion) — equivalently (key, kube-cdc.rv header) — and, to
// tolerate a re-emit that lands after a newer record of the same key, ignore a record
// whose RV is below the newest they applied for that key.
//
// Under a partial failure (some partitions acknowledge, one refuses) the producer reports
// per-record errors; the acknowledged records are done, and only the refused ones, in
// their order, are written again, within the same write and by the pipeline's retry of the
// prepared write alike, so no record of a batch goes out twice and each key stays in order.
//
// # Errors
//
// A broker that is down or unreachable is a retryable error. Terminal (the pipeline stops
// retrying): a missing topic with createTopics off (the error names the topic), rejected
// SASL credentials, missing authorization.
//
// # Quarantine
//
// A record larger than its topic accepts (Options.MaxMessageBytes, else the brokers'
// max.message.bytes) never stops the stream: measured before the first send, or found by
// splitting a batch the broker refused as too large, its change is quarantined
// (quarantine.go). A stub (the same key, headers and RV; the object reduced to its
// identity; source.quarantined) takes its place in the data topic, the record goes to the
// dead-letter topic (Options.DeadLetterTopic), the change is logged at warn and counted,
// and the checkpoint moves on. ReadQuarantine reads the dead-letter topic back.
//
// # Producing
//
// Every record (data, tombstones, dead letters, resolved records) goes out through one
// producer, produce.Producer (internal/sinks/kafka/produce): one produce request per
// partition leader for each chunk, over connections of its own, routed by the sink's
// kafka-go Transport. kafka-go's Client does the rest: metadata, topic creation,
// DescribeConfigs. (The kafka checkpoint store writes its offsets topic with a kafka-go
// Writer of its own.)
//
// # Checkpoints and the key index
//
// The sink keeps neither; a checkpoint.Store does (OpenCheckpoint). With the kafka store
// the checkpoint lives in a compacted offsets topic and the key index is rebuilt from the
// data topics at relist time (topicKeyIndex).
package kafka
