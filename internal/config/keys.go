package config

import (
	"reflect"
	"strings"
)

// keyInfo describes one leaf key of Config.
type keyInfo struct {
	path string       // canonical koanf path, "[]" for a list index: "sinks.[].postgres.dsn"
	typ  reflect.Type // the Go type of the leaf
}

// leafKeys returns every leaf key of Config, with "[]" standing for a list index
// ("sinks.[].kafka.brokers"), in struct order.
func leafKeys() []keyInfo {
	var out []keyInfo
	walkKeys(reflect.TypeFor[Config](), "", &out)
	return out
}

func walkKeys(t reflect.Type, prefix string, out *[]keyInfo) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("koanf")
		if tag == "" || tag == "-" {
			continue
		}
		path := tag
		if prefix != "" {
			path = prefix + "." + tag
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			n := len(*out)
			walkKeys(ft, path, out)
			if len(*out) == n { // a struct without keys is a leaf
				*out = append(*out, keyInfo{path: path, typ: ft})
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			walkKeys(ft.Elem(), path+".[]", out)
		default:
			*out = append(*out, keyInfo{path: path, typ: ft})
		}
	}
}

// keyIndex maps a lower-case key path (with "[]" for list indexes) to its key. Inner
// keys ("kubernetes", "sinks.[].kafka") are there too, with a nil typ.
type keyIndex map[string]keyInfo

var keys = func() keyIndex {
	idx := keyIndex{}
	for _, k := range leafKeys() {
		idx[strings.ToLower(k.path)] = k
		segs := strings.Split(k.path, ".")
		for i := 1; i < len(segs); i++ {
			inner := strings.Join(segs[:i], ".")
			if _, ok := idx[strings.ToLower(inner)]; !ok && segs[i-1] != "[]" {
				idx[strings.ToLower(inner)] = keyInfo{path: inner}
			}
		}
	}
	return idx
}()
