package source

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// lastApplied is kubectl's copy of the applied manifest: for a Secret, its values in clear.
const lastAppliedPath = `metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration`

// Transform edits an object's JSON before it leaves the source.
type Transform struct {
	// RedactSecrets replaces each value of a Secret's data and stringData, and its
	// last-applied annotation, by "sha256:<hex>" of the value, so a change stays visible
	// and the value does not.
	RedactSecrets bool
	// Drop lists sjson paths deleted from every object ("status", "metadata.annotations.x").
	Drop []string
}

// meta is what the stream reads of an object.
type meta struct {
	name, namespace, uid, rv string
	labels                   []byte
	changedBy                string
	time                     time.Time // newest of managedFields, creation and deletion times
}

// apply reads the object's metadata, records who changed it last, and returns the
// transformed JSON. secret says whether the object is a core/v1 Secret.
//
// Only the metadata object is parsed field by field; managedFields, the bulk of it, is cut
// out of the metadata and the result spliced back, so the rest of the object is scanned
// once and copied once.
func (t *Transform) apply(data []byte, secret bool) ([]byte, meta, error) {
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
	var err error
	if mf := md.Get("managedFields"); mf.Exists() {
		var at string
		m.changedBy, at = newestManager(mf)
		if at > newest {
			newest = at
		}
		if data, err = cutManagedFields(data, md); err != nil {
			return nil, m, err
		}
	}
	if newest != "" {
		m.time, _ = time.Parse(time.RFC3339, newest) // a malformed time leaves it zero
	}
	if secret && t.RedactSecrets {
		if data, err = redactSecret(data); err != nil {
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

// cutManagedFields returns data without metadata.managedFields: the field is deleted from
// the metadata object alone, which is then spliced back in place.
func cutManagedFields(data []byte, md gjson.Result) ([]byte, error) {
	if md.Index <= 0 || md.Index+len(md.Raw) > len(data) || string(data[md.Index:md.Index+len(md.Raw)]) != md.Raw {
		return sjson.DeleteBytes(data, "metadata.managedFields")
	}
	cut, err := sjson.Delete(md.Raw, "managedFields")
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(data)-len(md.Raw)+len(cut))
	out = append(out, data[:md.Index]...)
	out = append(out, cut...)
	return append(out, data[md.Index+len(md.Raw):]...), nil
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

func redactSecret(data []byte) ([]byte, error) {
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
			if data, err = sjson.SetBytes(data, field+"."+escapePath(k), digest(vals[i])); err != nil {
				return nil, err
			}
		}
	}
	if a := gjson.GetBytes(data, lastAppliedPath); a.Exists() {
		if data, err = sjson.SetBytes(data, lastAppliedPath, digest(a.Str)); err != nil {
			return nil, err
		}
	}
	return data, nil
}

func digest(v string) string {
	s := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(s[:])
}

// escapePath escapes the characters gjson/sjson give meaning to in a path component.
func escapePath(k string) string {
	r := strings.NewReplacer(`\`, `\\`, `.`, `\.`, `*`, `\*`, `?`, `\?`, `|`, `\|`, `#`, `\#`, `@`, `\@`, `:`, `\:`)
	return r.Replace(k)
}
