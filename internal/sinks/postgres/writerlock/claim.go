package writerlock

import "context"

// PolicyFor is the policy of a streaming process: under leader election the lease fences
// already, and the old leader's session may outlive its lease, so a new leader writes at
// once and takes the lock when it comes free (Fenced); with --wait it waits (OrWait);
// otherwise it refuses to start beside another process that writes the sink (OrRefuse).
func PolicyFor(leaderElection, wait bool) Policy {
	switch {
	case leaderElection:
		return Fenced
	case wait:
		return OrWait
	}
	return OrRefuse
}

// Claimer is a sink that claims exclusive writing (the PostgreSQL sink's writer lock).
type Claimer interface {
	ClaimWriter(ctx context.Context, policy Policy) error
}

// ClaimAll claims the writer lock of every sink that is a Claimer, in order, before the
// stream writes anything; the first error ends it.
func ClaimAll[S any](ctx context.Context, policy Policy, sinks []S) error {
	for _, s := range sinks {
		if c, ok := any(s).(Claimer); ok {
			if err := c.ClaimWriter(ctx, policy); err != nil {
				return err
			}
		}
	}
	return nil
}
