package checkpoint

// Options selects and configures a checkpoint store: the `sinks[].checkpoint` config keys.
// PostgreSQL sinks keep their checkpoints in their own database and ignore this.
type Options struct {
	// Type: file | none, or kafka for Kafka sinks. Required here; the config layer fills
	// each sink type's default (stdout.DefaultCheckpointType, kafka.DefaultCheckpointType).
	Type string `koanf:"type"`
	// Path of the bbolt file for Type file. Default DefaultPath, in the working directory.
	Path string `koanf:"path"`
	// Topic is the compacted topic for Type kafka. Default kafka.DefaultOffsetsTopic.
	Topic string `koanf:"topic"`
}
