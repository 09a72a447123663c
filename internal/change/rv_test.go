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
