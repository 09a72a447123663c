package change

import "testing"

func TestParseRVReadsUnsignedIntegersAndRejectsOthers(t *testing.T) {
	tests := []struct {
		in      string
		want    RV
		wantErr bool
	}{
		{"", 0, false},
		{"1", 1, false},
		{"18446744073709551615", 18446744073709551615, false},
		{"-1", 0, true},
		{"abc", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseRV(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseRV(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != tt.in {
			t.Errorf("ParseRV(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestKeyStringOmitsTheNamespaceOfClusterScopedObjects(t *testing.T) {
	if got := (Key{Namespace: "ns", Name: "a"}).String(); got != "ns/a" {
		t.Errorf("got %q", got)
	}
	if got := (Key{Name: "node-1"}).String(); got != "node-1" {
		t.Errorf("got %q", got)
	}
	if got := (Resource{Group: "apps", Resource: "deployments"}).ID(); got != "deployments.apps" {
		t.Errorf("got %q", got)
	}
}

func TestRVScansAndValuesAsABigint(t *testing.T) {
	for _, src := range []any{int64(42), "42", []byte("42")} {
		var r RV
		if err := r.Scan(src); err != nil || r != 42 {
			t.Errorf("Scan(%#v) = %v, %v; want 42", src, r, err)
		}
	}
	var r RV = 7
	if err := r.Scan(nil); err != nil || r != 0 {
		t.Errorf("Scan(nil) = %v, %v; want 0", r, err)
	}
	for _, src := range []any{int64(-1), "x", 3.5} {
		if err := r.Scan(src); err == nil {
			t.Errorf("Scan(%#v) succeeded", src)
		}
	}
	if v, err := RV(42).Value(); err != nil || v != int64(42) {
		t.Errorf("Value = %#v, %v", v, err)
	}
	if _, err := RV(1 << 63).Value(); err == nil {
		t.Error("Value of an RV above MaxInt64 succeeded")
	}
}
