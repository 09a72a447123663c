package change

import "testing"

func TestAPackedUIDUnpacksToTheVeryStringAndOtherFormsAreRefused(t *testing.T) {
	for _, c := range []struct {
		uid string
		ok  bool
	}{
		{"0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", true},
		{"00000000-0000-0000-0000-000000000000", true},
		{"ffffffff-ffff-ffff-ffff-ffffffffffff", true},
		{"0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9", false}, // upper case would come back lower
		{"0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8fg", false},
		{"0a1b2c3d4e5f607182930a4b5c6d7e8f9abc", false},
		{"-a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", false},
		{"{0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f}", false},
		{"", false},
		{"not-a-uid", false},
	} {
		u, ok := PackUID(c.uid)
		if ok != c.ok {
			t.Errorf("PackUID(%q) ok = %v, want %v", c.uid, ok, c.ok)
			continue
		}
		if ok {
			if got := UnpackUID(&u); got != c.uid {
				t.Errorf("UnpackUID(PackUID(%q)) = %q", c.uid, got)
			}
		}
	}
}
