package why

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/moment"
	"github.com/kube-cdc/kube-cdc/internal/read/store"
)

// Request is what `kube-cdc why` asks: an object, when it broke and how far back to look.
type Request struct {
	Resource change.Resource // as the store records it (history.Open matches the name)
	Key      change.Key
	At       string        // when it broke: now, a duration back (15m) or an RFC 3339 time
	Window   time.Duration // how far back from At
	Output   string        // text or json
	Where    string        // "in cluster C (sink S)", for the title
}

// Validate says what is wrong with the request's flags, before anything is opened.
func (r Request) Validate() error {
	if r.Output != "text" && r.Output != "json" {
		return fmt.Errorf("--output %q: want text or json", r.Output)
	}
	if r.Window <= 0 {
		return fmt.Errorf("--window %s: want a positive duration", r.Window)
	}
	if _, err := moment.Parse(r.At, time.Now()); err != nil {
		return fmt.Errorf("--at %w", err)
	}
	return nil
}

// Write reads the request's rows from s (store.Why) and prints them to w (Print).
func Write(ctx context.Context, w io.Writer, s *store.Store, r Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	at, _ := moment.Parse(r.At, time.Now())
	rows, err := s.Why(ctx, store.WhyQuery{Group: r.Resource.Group, Resource: r.Resource.Resource,
		Namespace: r.Key.Namespace, Name: r.Key.Name, At: at, Lookback: r.Window})
	if err != nil {
		return err
	}
	title := fmt.Sprintf("why %s %s %s: %d changes in the %s before %s", r.Resource.ID(), r.Key, r.Where,
		len(rows), r.Window, at.UTC().Format(time.RFC3339))
	return Print(w, title, rows, r.Output)
}
