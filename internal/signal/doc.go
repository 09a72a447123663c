// Package signal carries requests to a running kube-cdc, Debezium's "signals" done the
// Kubernetes way: `kube-cdc resnapshot` writes a request into a ConfigMap of the
// deployment (<leaderElection.name>-signals in leaderElection.namespace), every replica
// can see it, and the one that leads (the only one that streams) acts on it and writes
// the result back into the same ConfigMap, which the command waits for.
//
// Why a ConfigMap: it works for every sink (Kafka and stdout have no table to hold a
// signal, unlike Debezium's signal table), it reaches whichever replica leads without
// knowing its address (a standby needs no forwarding; a leader that dies mid-request
// leaves the request unanswered, and its successor answers it), and access to it is
// plain Kubernetes RBAC.
//
// The ConfigMap's data holds one key per request, "request.<id>" (Request as JSON), and
// one per answer, "result.<id>" (Result as JSON, state "running", then "done" or
// "failed"). The asker removes both once it read the final result. Writes are
// read-modify-write with the ConfigMap's resourceVersion, retried on conflict.
//
// Server serves the ConfigMap only while RBAC lets the leader use it (ServeVerbs): it
// asks first and every Recheck, says a missing grant once (its AccessObserver, a warning)
// and serves once it is back. A refused request ends serving at once and is never handed
// to client-go's reflector, which would log it at ERROR and retry it every few seconds.
package signal
