package history

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

func TestVisibleShowsEveryCharacterThatHidesOrReordersTextAsAMarker(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text is kept", "color: blue\n\tx ü 中 👍", "color: blue\n\tx ü 中 👍"},
		{"a right-to-left override", "allow: \u202Eeurt", "allow: ⟨U+202E⟩eurt"},
		{"every bidi embedding, override and pop", "\u202A\u202B\u202C\u202D\u202E", "⟨U+202A⟩⟨U+202B⟩⟨U+202C⟩⟨U+202D⟩⟨U+202E⟩"},
		{"the bidi isolates", "\u2066\u2067\u2068\u2069", "⟨U+2066⟩⟨U+2067⟩⟨U+2068⟩⟨U+2069⟩"},
		{"the bidi marks", "\u200E\u200F\u061C", "⟨U+200E⟩⟨U+200F⟩⟨U+061C⟩"},
		{"the zero-width characters", "a\u200Bb\u200Cc\u200Dd\u2060e\uFEFF", "a⟨U+200B⟩b⟨U+200C⟩c⟨U+200D⟩d⟨U+2060⟩e⟨U+FEFF⟩"},
		{"line and paragraph separators", "a\u2028b\u2029c", "a⟨U+2028⟩b⟨U+2029⟩c"},
		{"control characters but newline and tab", "a\x1b[31mb\rc\u0085d\x7f", "a⟨U+001B⟩[31mb⟨U+000D⟩c⟨U+0085⟩d⟨U+007F⟩"},
		{"a soft hyphen and a tag character", "a\u00ADb\U000E0041", "a⟨U+00AD⟩b⟨U+E0041⟩"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Visible(tc.in); got != tc.want {
				t.Errorf("Visible(%+q) = %+q, want %+q", tc.in, got, tc.want)
			}
		})
	}
}

func TestAValueWithABidiOverrideIsShownWithMarkersInTheDiffAndTheHeaderButExactInJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v1 := `{"data":{"allow":"false"}}`
	v2 := `{"data":{"allow":"\u202Eeslaf"}}` // reads as "false" where the override is honoured
	shown, err := Show([]store.Revision{
		{ID: 1, ObservedAt: at, Op: change.OpCreate, RV: 1, Object: json.RawMessage(v1)},
		{ID: 2, ObservedAt: at, Op: change.OpUpdate, RV: 2, Object: json.RawMessage(v2), Previous: json.RawMessage(v1),
			Actor: &change.Actor{Username: "dev", UserAgent: "kubectl\u202E/1", Match: "exact"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := Print(&text, "t", shown, "text"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"+  allow: ⟨U+202E⟩eslaf\n", "by dev (kubectl⟨U+202E⟩/1)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.ContainsRune(text.String(), '\u202E') {
		t.Errorf("the text holds U+202E itself:\n%+q", text.String())
	}
	var out bytes.Buffer
	if err := Print(&out, "t", shown, "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"value": "`+"\u202E"+`eslaf"`) {
		t.Errorf("-o json does not keep the value exact:\n%+q", out.String())
	}
}
