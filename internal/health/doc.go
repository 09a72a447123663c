// Package health says how an object is doing, computed when read from the object as
// stored (its JSON) and never stored twice (design §9): a State (ok, progressing,
// degraded, failed, unknown) and a short Reason a person reads beside it.
//
// The contract:
//
//   - Pure: no I/O, no clock, no global state; the same object gives the same Health.
//   - Of knows Pods (phase, readiness, restarts, OOMKilled, CrashLoopBackOff and the other
//     waiting reasons that never heal alone, an unschedulable pod), Deployments,
//     StatefulSets and DaemonSets (a rollout not yet observed or under way, the Available,
//     Progressing and ReplicaFailure conditions, replicas ready), Nodes (Ready, the
//     pressure conditions, cordoned) and Jobs (Failed and Complete, failed pods retried).
//     Any other resource is Unknown with the reason "no health rule", never an error.
//   - An object being deleted (metadata.deletionTimestamp) is progressing, "terminating".
//   - An object that cannot be decoded is an error; a missing status is Unknown (or
//     progressing for a workload whose controller has not observed it yet).
//   - Failed is what does not heal alone (a crash loop, an image that cannot be pulled, a
//     job out of retries, a node not ready, a rollout past its deadline); degraded is
//     working with less than wanted; progressing is on its way to ok.
//
// Resources are named as the change log names them: the API group ("" for core) and the
// plural resource.
package health
