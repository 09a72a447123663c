// Package produce is the Kafka sink's producer: it sends a chunk of records to the
// leaders of their partitions and says, per record, whether the brokers acknowledged it.
// It stands in for kafka-go's Writer and Transport on the produce path (why: Send and
// leaderConns), and uses kafka-go's protocol package for the wire format and its
// Transport's metadata cache for routing.
//
// What Send promises:
//
//   - Partitioning: a record goes to the partition kafka-go's hash balancer (kafka.Hash)
//     picks for its key, so a key keeps its partition whichever client wrote it before.
//   - One request per leader: each partition's records go out as one record batch, in
//     their order, in one Produce request per broker (in parallel when several lead), with
//     acks from every in-sync replica (RequiredAcks all; never fire-and-forget).
//   - Errors per partition, lined up with the records (kafka.WriteErrors): the records of
//     a partition that answered without error are acknowledged and must not be sent again;
//     the others are not written, and the caller sends them again, in order. A record over
//     Config.MaxMessageBytes fails the chunk before anything is sent
//     (kafka.MessageTooLargeError). Broker answers keep their kafka.Error codes, so the
//     caller classifies them (retryable, terminal, too large).
//   - Leader moves: after a failed send, a topic's leaders are asked of a broker directly
//     (not the Transport's cache, which may lag by its MetadataTTL) until the cache has
//     caught up, so the next send reaches a partition's new leader.
//   - Connections: TLS, API-version negotiation and SASL as the Transport's settings say;
//     a connection that failed in any way is closed; a cancelled context ends a request
//     at once; a request is bounded by Config.WriteTimeout (to one and a half of it).
//
// The caller sizes chunks (at most one request's worth per partition, within the topic's
// limit) and decides what to do with refused records: the sink splits, quarantines or
// retries them (internal/sinks/kafka, produce in sink.go).
package produce
