package source

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/kube-cdc/kube-cdc/internal/change"
)

// lastApplied is kubectl's copy of the applied manifest: for a Secret, its values in clear.
const lastAppliedPath = `metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration`

// DigestPrefix starts every redacted Secret value: "hmac-sha256:" and 64 hex digits.
const DigestPrefix = "hmac-sha256:"

// errNoDigestKey refuses to redact a Secret without a key: an unkeyed digest of a weak
// value is reversed offline by anyone who can read the sink.
var errNoDigestKey = errors.New("transforms.redactSecrets is on and no digest key is set: " +
	"set transforms.digestKey (KUBE_CDC_TRANSFORMS__DIGESTKEY) or transforms.digestKeyFile")

// Transform edits an object's JSON before it leaves the source. It is shared by every
// stream of the process and never changed after they start.
type Transform struct {
	// RedactSecrets replaces each value of a Secret's data and stringData, and its
	// last-applied annotation, by DigestPrefix + hex(HMAC-SHA256(DigestKey, value)), the
	// value as the object holds it (base64 for data), so a change stays visible and the
	// value does not.
	RedactSecrets bool
	// DigestKey keys the digests. The same key gives the same digests across restarts and
	// replicas. Required to stream Secrets while RedactSecrets is on: without it the
	// stream of a Secret resource fails, terminally, before reading anything.
	DigestKey []byte
	// Drop lists sjson paths deleted from every object ("status", "metadata.annotations.x").
	Drop []string
}

// check refuses a resource the transform cannot make safe.
func (t *Transform) check(typ objectType) error {
	if typ.secret && t.RedactSecrets && len(t.DigestKey) == 0 {
		return errNoDigestKey
	}
	return nil
}

// objectType is what the transform knows of the resource an object belongs to.
type objectType struct {
	// apiVersion, kind and both are the members to write, each followed by a comma, into
	// objects that lack them (`"apiVersion":"apps/v1",` and `"kind":"Deployment",`): a
	// LIST's items (CRDs' aside) omit both, a watch event's object has both, and every
	// change carries them. Built once per stream, so an object costs no allocation more.
	apiVersion, kind, both string
	secret                 bool // a core/v1 Secret
}

func typeOf(r change.Resource) objectType {
	gv := r.Version
	if r.Group != "" {
		gv = r.Group + "/" + r.Version
	}
	t := objectType{secret: r.Group == "" && r.Resource == "secrets"}
	if r.Version != "" {
		t.apiVersion = `"apiVersion":` + strconv.Quote(gv) + "," // DNS names and versions: JSON-safe
	}
	if r.Kind != "" {
		t.kind = `"kind":` + strconv.Quote(r.Kind) + ","
	}
	t.both = t.apiVersion + t.kind
	return t
}

// head returns the members to insert at the front of data: those of apiVersion and kind
// that data lacks. The top level is scanned once, through a string view of data (no
// copy), and the scan stops once both are found; the apiserver writes them first when it
// writes them at all.
func (typ objectType) head(data []byte) string {
	if typ.both == "" {
		return ""
	}
	hasVersion, hasKind := typ.apiVersion == "", typ.kind == ""
	gjson.Parse(unsafe.String(unsafe.SliceData(data), len(data))).ForEach(func(k, _ gjson.Result) bool {
		switch k.Str {
		case "apiVersion":
			hasVersion = true
		case "kind":
			hasKind = true
		}
		return !hasVersion || !hasKind
	})
	switch {
	case hasVersion && hasKind:
		return ""
	case hasVersion:
		return typ.kind
	case hasKind:
		return typ.apiVersion
	}
	return typ.both
}

// meta is what the stream reads of an object.
type meta struct {
	name, namespace, uid, rv string
	labels                   []byte
	changedBy                string
	time                     time.Time // newest of managedFields, creation and deletion times
}

// apply reads the object's metadata, records who changed it last, and returns the
// transformed JSON: with apiVersion and kind (typ's, when the object lacks them), without
// managedFields, with a Secret's values redacted and the configured paths dropped.
//
// Only the metadata object is parsed field by field; managedFields, the bulk of it, is cut
// out of the metadata and the result spliced back, together with any missing apiVersion
// and kind, so the rest of the object is scanned once and copied once.
func (t *Transform) apply(data []byte, typ objectType) ([]byte, meta, error) {
	md := gjson.GetBytes(data, "metadata")
	r := md.Get("name")
	m := meta{name: r.Str}
	m.namespace = md.Get("namespace").Str
	m.uid = md.Get("uid").Str
	m.rv = md.Get("resourceVersion").Str
	if l := md.Get("labels"); l.IsObject() {
		m.labels = []byte(l.Raw)
	} else {
		m.labels = []byte("{}")
	}
	newest := md.Get("creationTimestamp").Str
	if d := md.Get("deletionTimestamp").Str; d > newest {
		newest = d
	}
	if err := t.check(typ); err != nil {
		return nil, m, err
	}
	head := typ.head(data)
	var err error
	if mf := md.Get("managedFields"); mf.Exists() {
		var at string
		m.changedBy, at = newestManager(mf)
		if at > newest {
			newest = at
		}
		if data, err = cutManagedFields(data, md, head); err != nil {
			return nil, m, err
		}
	} else if head != "" {
		data = insertHead(nil, data, head)
	}
	if newest != "" {
		m.time, _ = time.Parse(time.RFC3339, newest) // a malformed time leaves it zero
	}
	if typ.secret && t.RedactSecrets {
		if data, err = redactSecret(data, t.DigestKey); err != nil {
			return nil, m, err
		}
	}
	for _, p := range t.Drop {
		if gjson.GetBytes(data, p).Exists() {
			if data, err = sjson.DeleteBytes(data, p); err != nil {
				return nil, m, err
			}
		}
	}
	return data, m, nil
}

// cutManagedFields returns data without metadata.managedFields and with head inserted
// at the front: the field is deleted from the metadata object alone, which is then
// spliced back in place, in the one copy of the object.
func cutManagedFields(data []byte, md gjson.Result, head string) ([]byte, error) {
	if md.Index <= 0 || md.Index+len(md.Raw) > len(data) || string(data[md.Index:md.Index+len(md.Raw)]) != md.Raw {
		out, err := sjson.DeleteBytes(data, "metadata.managedFields")
		if err != nil || head == "" {
			return out, err
		}
		return insertHead(nil, out, head), nil
	}
	cut, err := sjson.Delete(md.Raw, "managedFields")
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+len(data)-len(md.Raw)+len(cut))
	out = insertHead(out, data[:md.Index], head) // the metadata follows: head's comma is due
	out = append(out, cut...)
	return append(out, data[md.Index+len(md.Raw):]...), nil
}

// insertHead appends to out the JSON object (or the start of one) data, with head's
// members inserted after its opening brace; head ends with a comma, dropped when the
// object is empty. out nil allocates exactly what is needed.
func insertHead(out, data []byte, head string) []byte {
	i := bytes.IndexByte(data, '{')
	if i < 0 || head == "" {
		return append(out, data...)
	}
	if out == nil {
		out = make([]byte, 0, len(data)+len(head))
	}
	out = append(out, data[:i+1]...)
	if rest := bytes.TrimLeft(data[i+1:], " \t\r\n"); len(rest) > 0 && rest[0] == '}' {
		out = append(out, head[:len(head)-1]...)
	} else {
		out = append(out, head...)
	}
	return append(out, data[i+1:]...)
}

// newestManager returns "manager/operation" of the managedFields entry with the latest
// time, and that time (RFC 3339 strings of one format order as text).
func newestManager(mf gjson.Result) (string, string) {
	var best, bestTime string
	mf.ForEach(func(_, e gjson.Result) bool {
		r := e.Get("time").Str
		if best == "" || r >= bestTime {
			best = e.Get("manager").Str + "/" + e.Get("operation").Str
			bestTime = r
		}
		return true
	})
	return best, bestTime
}

// redactSecret replaces the values of a Secret's data and stringData, and its
// last-applied annotation, by their keyed digests.
func redactSecret(data, key []byte) ([]byte, error) {
	if len(key) == 0 {
		return nil, errNoDigestKey
	}
	mac := hmac.New(sha256.New, key)
	var err error
	for _, field := range []string{"data", "stringData"} {
		obj := gjson.GetBytes(data, field)
		if !obj.IsObject() {
			continue
		}
		var keys, vals []string
		obj.ForEach(func(k, v gjson.Result) bool {
			keys = append(keys, k.Str)
			vals = append(vals, v.String())
			return true
		})
		for i, k := range keys {
			if data, err = sjson.SetBytes(data, field+"."+escapePath(k), digest(mac, vals[i])); err != nil {
				return nil, err
			}
		}
	}
	if a := gjson.GetBytes(data, lastAppliedPath); a.Exists() {
		if data, err = sjson.SetBytes(data, lastAppliedPath, digest(mac, a.Str)); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// digest is DigestPrefix + hex(HMAC-SHA256(key, v)), mac being a keyed HMAC: without the
// key, a weak value cannot be found from its digest by trying candidates.
func digest(mac hash.Hash, v string) string {
	mac.Reset()
	mac.Write([]byte(v))
	var sum [sha256.Size]byte
	return DigestPrefix + hex.EncodeToString(mac.Sum(sum[:0]))
}

// escapePath escapes the characters gjson/sjson give meaning to in a path component.
func escapePath(k string) string {
	r := strings.NewReplacer(`\`, `\\`, `.`, `\.`, `*`, `\*`, `?`, `\?`, `|`, `\|`, `#`, `\#`, `@`, `\@`, `:`, `\:`)
	return r.Replace(k)
}
