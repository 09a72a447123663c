// Package pgtext makes strings storable as PostgreSQL text. What clients and
// authenticators say (an object's name, an OIDC claim, a user agent) may hold a NUL byte
// or invalid UTF-8, which text refuses: one such value would fail its whole statement or
// batch, again at every retry. Valid replaces both with U+FFFD and leaves every other
// string as it is, without copying it. The PostgreSQL sink (its quarantine rows) and the
// audit store both use it.
package pgtext
