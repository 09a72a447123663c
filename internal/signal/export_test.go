package signal

import "time"

// SetPoll shortens how often s reads the ConfigMap besides watching it (PollInterval).
func SetPoll(s *Server, d time.Duration) { s.poll = d }

// ServeEvery is Serve reading the ConfigMap every poll besides watching it.
var ServeEvery = serve
