package config

import "fmt"

// ReadSink is the sink the read side (history, as-of, the web UI) reads: the one named
// name, or the first PostgreSQL sink when name is "". command names the reader in errors.
// A named sink of another type is returned with the error, which says it keeps no history.
func (c *Config) ReadSink(name, command string) (Sink, error) {
	for _, sc := range c.Sinks {
		if name == "" && sc.Type == SinkPostgres {
			return sc, nil
		}
		if name != "" && sc.Name == name {
			if sc.Type != SinkPostgres {
				return sc, fmt.Errorf("--sink %s: a %s sink keeps no history; %s reads a postgres sink's changes table", name, sc.Type, command)
			}
			return sc, nil
		}
	}
	if name != "" {
		return Sink{}, fmt.Errorf("--sink %s: no sink of that name in the config", name)
	}
	return Sink{}, fmt.Errorf("%s reads a postgres sink's changes table, and the config has no postgres sink", command)
}
