package change

import "testing"

func TestVersionsOrderByEpochThenRV(t *testing.T) {
	for _, tc := range []struct {
		a, b Version
		want int
	}{
		{Version{0, 5}, Version{0, 7}, -1},
		{Version{0, 7}, Version{0, 7}, 0},
		{Version{1, 3}, Version{0, 900}, 1}, // a restored cluster's lower RV in a new epoch is newer
		{Version{2, 1}, Version{3, 1}, -1},
	} {
		if got := tc.a.Compare(tc.b); got != tc.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := tc.b.Compare(tc.a); got != -tc.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

func TestAVersionParsesBackFromItsString(t *testing.T) {
	for _, v := range []Version{{}, {0, 123}, {2, 45}, {7, 1 << 40}} {
		got, err := ParseVersion(v.String())
		if err != nil || got != v {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", v.String(), got, err, v)
		}
	}
	for _, s := range []string{"x", "-1/5", "1/x", "a/5"} {
		if _, err := ParseVersion(s); err == nil {
			t.Errorf("ParseVersion(%q) accepted it", s)
		}
	}
}

func TestAKeyParsesBackFromItsString(t *testing.T) {
	for _, k := range []Key{{Namespace: "ns", Name: "a"}, {Name: "node-1"}} {
		if got := ParseKey(k.String()); got != k {
			t.Errorf("ParseKey(%q) = %+v, want %+v", k.String(), got, k)
		}
	}
}
