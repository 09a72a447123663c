// Package source turns a Kubernetes resource into a stream of events: a relist when there
// is no usable checkpoint, then a Watch from the last resource version with bookmarks,
// resumed after every disconnect and relisted after 410 Gone (after a random delay up to
// RelistJitter). A relist is a paged LIST or a streaming list (WatchList, watchlist.go:
// the initial events of a sendInitialEvents watch, whose RelistEnd comes only at the
// k8s.io/initial-events-end bookmark); ListAuto streams where the server supports it and
// remembers per resource where it does not (a 422 to sendInitialEvents).
//
// It never decodes an object into Go maps or typed structs. Objects travel as the JSON
// bytes the apiserver sent; the few metadata fields kube-cdc needs (name, namespace, uid,
// resourceVersion, labels, the newest managedFields entry) are read with gjson, and the
// transforms edit the bytes: apiVersion and kind written into a LIST's items (which omit
// them, unlike watch events), managedFields dropped, Secrets' values replaced by keyed
// HMAC-SHA256 digests (never unkeyed: a Secret resource without a digest key does not
// stream), configured drops. The only per-object state is what the caller keeps: this
// package keeps none.
//
// Scopes (scopes.go) group the targets of one resource and answer, from the cluster,
// whether an object a relist or a selector watch no longer shows is gone, left every
// configured scope, or is another scope's (design §1.9, "Scopes own their keys").
//
// A Resolution (resolution.go) follows the configured targets as the server serves them
// (CRDs created or recreated while running); its Feeds (feed.go) are what the pipeline
// streams, one per target: each implements pipeline.Target without this package
// importing the pipeline. ScopesOf gives a spec's scope ids from the spec alone.
//
// Watches are read by the stream itself (watch.go, watchstream.go), not by client-go's
// RetryWatcher and StreamWatcher: one goroutine from the socket to the caller's emit,
// the response framed by jsonFramer and each envelope read with gjson, over HTTP/1.1 so
// that no transport goroutine reads the socket either (client.go). LISTs and discovery
// use HTTP/2, on a connection of their own.
//
// Retry policy, beside the code that applies it (stream.go and watch.go run it, errors.go
// classifies):
//   - a watch that closes is re-opened from the last RV: at once when the server ended
//     it or the connection dropped (re-opens paced to one a second), after exponential
//     backoff and jitter, waited on the stream's Clock, when it failed (a refused request,
//     an ERROR event other than 410, bytes that are no watch event);
//   - 410 Gone / "too old resource version" is never retried: the stream relists
//     (relist.go), also when a LIST's continue token expires mid-relist;
//   - before every watch the server is asked for its current RV (travel.go); below the
//     RV the watch would start from, the cluster went back in time (an etcd restore) and
//     the stream relists rather than wait on a watch from the future;
//   - Forbidden, Unauthorized, not served (a CRD deleted or not yet created, a 404/405 on
//     the watch) and a non-integer RV end the stream with a Fault (errors.go), marked
//     retry.Terminal: the pipeline degrades that resource alone and starts it again
//     later with backoff; the other resources stream on.
//
// Access (access.go): ReviewAccess asks the apiserver (SelfSubjectAccessReviews) whether a
// target may be listed and watched where its stream reads it, for `kube-cdc check` and
// run's start; AccessCheck asks it periodically while streaming, because the apiserver
// asks RBAC only when a watch opens, and a permission revoked under an open watch would
// otherwise show only at the next re-watch, minutes later.
//
// This is the only package that imports client-go.
package source
