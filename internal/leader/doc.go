// Package leader runs kube-cdc's pipeline on one replica at a time, elected through a
// coordination.k8s.io Lease (client-go's leaderelection with a LeaseLock).
//
// Run blocks as a candidate; once it holds the lease it calls lead with a context that is
// cancelled the moment leadership is in doubt, and returns when lead does. A replica that
// loses its lease never tries to lead again in the same process: Run returns an error
// wrapping ErrLostLease and the process exits, so it restarts as a clean standby rather
// than carrying state from a term it no longer owns.
//
// Fencing. Two layers keep a deposed leader from doing harm:
//
//   - The leader stops writing before anyone else may start. Its lead context is
//     cancelled once RenewDeadline has passed since the start of its last successful
//     renewal, without waiting for client-go to give up and try to release the lease.
//     A standby may only take over after LeaseDuration (> RenewDeadline) without a
//     renewal, so the gap, LeaseDuration - RenewDeadline (5s by default), is the time
//     the old leader has to notice the cancellation and abandon its in-flight batch.
//   - Writes that still land late cannot move state backwards. The PostgreSQL sink's
//     upserts are guarded by resource version (ON CONFLICT … WHERE objects.resource_version
//     < excluded.resource_version), the changes table is unique on (key, rv, op), and
//     checkpoints advance with GREATEST(), so a stale batch from a deposed leader is
//     either a no-op or an exact duplicate of what the new leader writes. Kafka is at
//     least once anyway; a late record is a duplicate that consumers dedupe on (key, rv).
//
// On a clean shutdown (ctx ends) the leader finishes lead first, then releases the lease
// (ReleaseOnCancel), so a standby takes over within about a second rather than waiting
// out the lease.
package leader
