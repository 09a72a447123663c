// Package moment reads a moment as a person types it, the same way in `kube-cdc as-of`
// and the web UI's as-of page: "now", an RFC 3339 time, or a duration back from now.
//
// Contract: Parse never consults a clock (the caller passes now), reads nothing and
// depends on nothing of the project; its error names what it read and what it wants,
// without the caller's key, which the caller adds ("TIME …", "at …").
package moment
