package checkpoint

// Options selects and configures a checkpoint store: the `sinks[].checkpoint` config keys.
// PostgreSQL sinks keep their checkpoints in their own database and ignore this.
type Options struct {
	// Type: file | kafka | none. Default file for kafka sinks, none for stdout (which then
	// relists and emits a snapshot at every start).
	Type string `koanf:"type"`
	// Path of the bbolt file for Type file. Default "kube-cdc-state.db" in the working directory.
	Path string `koanf:"path"`
	// Topic is the compacted topic for Type kafka. Default "kube-cdc.offsets.{cluster}".
	Topic string `koanf:"topic"`
}
