package ignorepaths

import (
	"regexp"
	"slices"
	"testing"
)

func TestARegexpMatchesTheIgnoredPathsAndWhatIsBelowThemOnly(t *testing.T) {
	re := regexp.MustCompile(Regexp(For("", "nodes", []string{"/metadata/annotations/example.com~1beat", "/spec/x.y"}, true)))
	for _, p := range []string{
		"/status/conditions/0/lastHeartbeatTime", "/status/conditions/12/lastHeartbeatTime", "/metadata/resourceVersion",
		"/metadata/annotations/example.com~1beat", "/metadata/annotations/example.com~1beat/deeper", "/spec/x.y",
	} {
		if !re.MatchString(p) {
			t.Errorf("%s is not ignored", p)
		}
	}
	for _, p := range []string{
		"/status/conditions/0/status", "/status/conditions/0", "/status/conditions", "/status/conditions/0/lastHeartbeatTimeX",
		"/metadata/labels/a", "/metadata/annotations/example.com~1beats", "/spec/xzy", "/metadata/resourceVersionX", "/x/metadata/resourceVersion",
	} {
		if re.MatchString(p) {
			t.Errorf("%s is ignored", p)
		}
	}
}

func TestUserPathsAddToTheDefaultsUnlessTheDefaultsAreOff(t *testing.T) {
	if got := For("", "nodes", []string{"/status/images"}, true); !slices.Equal(got,
		[]string{"/status/conditions/*/lastHeartbeatTime", "/status/images", ResourceVersion}) {
		t.Errorf("nodes with a path: %v", got)
	}
	if got := For("", "nodes", []string{"/status/images"}, false); !slices.Equal(got, []string{"/status/images", ResourceVersion}) {
		t.Errorf("nodes without defaults: %v", got)
	}
	if got := For("coordination.k8s.io", "leases", nil, true); !slices.Equal(got, []string{"/spec/renewTime", ResourceVersion}) {
		t.Errorf("leases: %v", got)
	}
	if got := For("", "pods", nil, true); got != nil {
		t.Errorf("pods have defaults: %v", got)
	}
	if got := For("", "nodes", nil, false); got != nil {
		t.Errorf("nodes with defaults off and no paths: %v", got)
	}
}

func TestValidateNamesWhatIsWrongWithAPath(t *testing.T) {
	for _, p := range []string{"", "/", "status", "/status//x", "/status/cond*", "/a/~2", "/a/b~"} {
		if Validate(p) == nil {
			t.Errorf("%q accepted", p)
		}
	}
	for _, p := range []string{"/status", "/status/conditions/*/lastHeartbeatTime", "/metadata/annotations/a~1b~0c", "/*/x"} {
		if err := Validate(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
}

func TestTheSQLOfNoPathsIsEmpty(t *testing.T) {
	if StripSQL(nil, "a") != "" || EqualSQL(nil, "a", "b") != "" || Regexp(nil) != "" {
		t.Error("SQL for no paths")
	}
}
