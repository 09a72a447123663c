// Package ui serves kube-cdc's read-only web timeline over a PostgreSQL sink's schema
// (`kube-cdc ui`, and inside `run` when ui.address is set): server-rendered pages from
// html/template, their templates and assets embedded with go:embed, so the binary needs
// nothing else and nothing is fetched from elsewhere.
//
// Pages (every filter and range lives in the URL, so a link reproduces the view). Times
// are shown in UTC, or in the IANA zone the tz parameter names (the timeline's "local"
// link names the browser's), 24-hour and with the zone's name; an invalid tz is a 400 on
// the timeline. Every page, the error page too, has the same header (the cluster, the
// links) and the embedded favicon.
//   - / the timeline: changes per minute, hour or day in the range, stacked by resource,
//     deletes and inferred deletes apart; below it the feed of that range, newest first
//     (observed_at DESC, id DESC), keyset paginated both ways (before=ID&before_at=TIME
//     below the last row shown, after=ID&after_at=TIME above the first, which returns
//     to the page before), filtered by cluster, namespace, resource, name, op,
//     snapshot/inferred/observed and, when actors exist, user. The filters read what a
//     person types: resource a plural, kubectl short name or kind, resolved against the
//     recorded resources (resolve.go; unknown is a 400 listing them); name a substring
//     (any case), PREFIX*, =EXACT or ~REGEX (PostgreSQL's, any case; checked by
//     PostgreSQL first, invalid is a 400 naming the parameter and why); user a
//     substring. A name that is not exact, and the user, no index serves: the store
//     checks them on at most store.DefaultWindow changes a page and the page says where
//     it stopped, "older →" searching on. An empty page with filters set says how many
//     changes of the range they excluded (counted up to 10,000), not that the range is
//     empty. The chart's counts come from /chart.json (the same parameters), which the
//     page fetches, so the feed never waits for a long range's counts. The chart is drawn by uPlot (static/uPlot.*, built by `make ui-assets` from
//     web/package-lock.json) and static/timeline.js; without JavaScript the feed, the
//     range presets and the filters still work. A resource's colour is a hash of its name
//     into a fixed palette (the same in every range); deletes and inferred deletes have
//     their own. Health is two more series, not stacked: the versions of resources with a
//     health rule that went bad and that recovered (the first 20,000 of the range).
//   - /lanes one lane per object that changed in the range (store.Lanes, one statement),
//     grouped by namespace and kind, or with group=workload nested under the controllers
//     its versions and the live objects name (Deployment, ReplicaSets, Pods), at most 500
//     a page (page=N); server-rendered SVG, each version a mark at its observed_at
//     (sub-second apart when zoomed) coloured by op (the resource's colour for creates and
//     updates, as the timeline's hash) and by health (internal/health, computed here from
//     each version's object: went bad, recovered; the lane shaded while bad); Kubernetes
//     Events (store.Events, when the events table exists) as triangles under the lane,
//     Warning ones amber. A mark links /object…#vID. The timeline's range, filters
//     (namespace, resource, name) and tz; static/lanes.js adds drag to zoom.
//   - /object every version of one object (the newest 5, the rest under a <details> "show
//     all"; its timeline link keeps the range and tz it was opened with): when, op, RV,
//     field manager (marked as such, with a hint that it is not the user), user (actors,
//     with the client of its user agent),
//     reason of an inferred delete, epoch, and the diff against the version before, the
//     same as `kube-cdc history` (internal/read/history) from the same read
//     (store.History: object_versions(), migration 020); owners and children when the
//     relation view `owners` exists; its Kubernetes Events when the events table does.
//   - /asof a namespace's objects of a resource at a moment, when as_of() exists, in
//     kubectl get's columns for the kind (internal/read/columns, which `kube-cdc as-of`
//     prints too), AGE counted to the moment, each row coloured by its health then; at is
//     read by internal/moment as `kube-cdc as-of` reads its TIME (now, the default;
//     15m; RFC 3339), resource as the feed's filter reads it, and the page shows the
//     moment read and the row count; a name links the version shown then
//     (/object…#vID, which the browser opens if collapsed). Long values wrap, or come
//     cut with "…" and whole in their title: no page is wider than the window.
//   - /why what changed before an object broke (resource, ns, name; at read by
//     internal/moment, now by default; window, 30m by default): the same read as `kube-cdc
//     why` (store.Why with Objects: why() of migration 019 and object_versions() of 020
//     in one statement), oldest first, each change with its relation, who made it (the
//     audit user and the client of its user agent, the field manager marked as such) and
//     its diff against the version before (internal/read/history), creates and node
//     updates folded; the object's health (internal/health) on its newest version in the
//     window. The object page shows the object's health on its newest version and links
//     this page: prominently, at the moment the current run of failed or degraded
//     versions began, when it is so.
//   - /status what `kube-cdc status` shows, from the callback Options.Status.
//
// Every read goes through internal/read/store (Options.Store), which owns the queries;
// this package turns URLs into reads and rows into pages. Migration 013 adds the as-of
// function (as_of) and the relation views (owners), 014 the actors (change_actors):
// each request probes for them and the pages leave out what is absent. The object page
// needs object_versions (020), which `kube-cdc migrate` (or run) creates.
//
// Contract: the handler only reads (its connections set default_transaction_read_only,
// and a role with USAGE on the schema and SELECT on its tables and views is enough);
// every value from the cluster reaches the page through html/template's escaping (no
// template.HTML on data), and the pages run no inline script (a Content-Security-Policy
// allows only the embedded scripts); Secrets' values are whatever the sink holds, which
// is keyed digests. Access: Options.Token demands a bearer token (or HTTP basic auth
// with the token as password, for browsers); Options.TrustedHeader demands a header an
// authenticating proxy sets. Neither set: anyone who reaches the address reads, which
// is why the listener defaults to loopback.
package ui
