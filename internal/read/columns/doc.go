// Package columns computes what `kubectl get` would have printed for an object at a
// moment: the per-kind columns of a table (pods READY, STATUS, RESTARTS, AGE, NODE,
// IMAGE; deployments READY, UP-TO-DATE, AVAILABLE, AGE; …) from the object's JSON as the
// change log stores it. The web UI's as-of page and `kube-cdc as-of` share it.
//
// The contract:
//
//   - Pure: no I/O, no clock, no global state. AGE is the object's age at the moment the
//     caller names (the as-of moment), never at the time of reading: a pod created 5
//     minutes before the moment reads 5m, whenever the table is printed.
//   - For(group, resource) names the columns after NAME for a resource; Row computes
//     them for one object, in the same order. Pods, Deployments, ReplicaSets,
//     StatefulSets, DaemonSets, Services, Nodes, Jobs, ConfigMaps and Secrets have their
//     kubectl columns (IMAGE on pods too, which kubectl leaves to -o wide); any other
//     resource gets AGE and LABELS.
//   - A long value is cut to its column's width with a visible "…"; the Cell keeps the
//     whole value (Full) for a tooltip. Nothing else is elided.
//   - An object that cannot be decoded is an error naming the resource; a missing field
//     reads as kubectl reads it (<none>, 0, <unknown> for an age without a
//     creationTimestamp).
//   - Each row carries the object's health (internal/health, which computes pods'
//     readiness and restarts and workloads' conditions): the page colours a row by it.
//
// Resources are named as the change log names them: the API group ("" for core) and the
// plural resource.
package columns
