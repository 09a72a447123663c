// Package kafkascan reads a whole Kafka topic, partition by partition in offset order,
// up to each partition's high watermark as of the call, stepping over the gaps log
// compaction leaves. The Kafka checkpoint store rebuilds its state with it, the Kafka sink
// its key index, and the test environment reads topics back with it.
package kafkascan
