package source

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kube-cdc/kube-cdc/internal/change"
	"github.com/kube-cdc/kube-cdc/internal/retry"
)

// relist emits RelistBegin, one Listed per object and RelistEnd with the LIST's RV, read
// as the stream's ListMode says: a streaming list (watchlist.go) or a paged LIST. Under
// ListAuto, a server that does not stream lists of the resource is remembered (ListModes)
// and this relist, and every later one of the resource, lists pages instead.
func (s *Stream) relist(ctx context.Context, emit func(context.Context, change.Event) error) (change.RV, error) {
	mode := s.listMode()
	if mode == ListPaged {
		return s.pagedList(ctx, emit)
	}
	id := s.Target.Resource.ID()
	rv, err := s.streamList(ctx, emit)
	var no *errNoWatchList
	switch {
	case !errors.As(err, &no):
		return rv, err
	case mode == ListStream:
		return 0, retry.Terminal(fmt.Errorf("resource %s: kubernetes.listMode is %s: %w", id, ListStream, err))
	}
	s.ListModes.set(id, ListPaged)
	s.Log.Info("the server does not stream lists of this resource; listing pages instead, from now on",
		"resource", id, "error", no.err)
	return s.pagedList(ctx, emit)
}

// listPage is one page of a paged LIST, or why it could not be read.
type listPage struct {
	body []byte
	err  error
}

// fetchPage asks for the page after cont ("" for the first) in a goroutine of its own;
// the channel delivers it, and is buffered: the goroutine never waits for a reader.
func (s *Stream) fetchPage(ctx context.Context, cont string) <-chan listPage {
	out := make(chan listPage, 1)
	go func() {
		body, err := s.listPage(ctx, cont)
		out <- listPage{body, err}
	}()
	return out
}

// listPage reads the page after cont ("" for the first) of the resource's LIST.
func (s *Stream) listPage(ctx context.Context, cont string) ([]byte, error) {
	res := s.Target.Resource
	req := s.Clients.list.Get().AbsPath(collectionPath(res, s.namespace())).
		Param("limit", strconv.FormatInt(s.PageSize, 10))
	if cont != "" {
		req = req.Param("continue", cont)
	}
	if s.Target.LabelSelector != "" {
		req = req.Param("labelSelector", s.Target.LabelSelector)
	}
	if s.Target.FieldSelector != "" {
		req = req.Param("fieldSelector", s.Target.FieldSelector)
	}
	result := req.Do(ctx)
	body, err := result.Raw()
	if err != nil {
		err = result.Error() // decodes the apiserver's Status, whose message names the cause
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			// The continue token outlived etcd's history: start the LIST over.
			return nil, fmt.Errorf("resource %s: list continuation expired: %w", res.ID(), err)
		}
		return nil, classify(res, "list", err)
	}
	return body, nil
}

// pagedList is a relist read with a paged LIST: pages are requested with limit/continue,
// and every page is read at the first page's RV.
func (s *Stream) pagedList(ctx context.Context, emit func(context.Context, change.Event) error) (change.RV, error) {
	res := s.Target.Resource
	s.observeStart(ListPaged)
	if err := emit(ctx, change.Event{Type: change.RelistBegin}); err != nil {
		return 0, errors.Join(errEmit, err)
	}
	p := s.newListProgress()
	// The next page is asked for as soon as this one's continue token is read, so the
	// apiserver serves it while this one is decoded and emitted (at most two pages held).
	ctx, cancel := context.WithCancel(ctx)
	var next <-chan listPage
	defer func() {
		cancel()
		if next != nil {
			<-next // the request in flight ends with ctx: nothing outlives the relist
		}
	}()
	next = s.fetchPage(ctx, "")
	var listRV change.RV
	for {
		pg := <-next
		next = nil
		if pg.err != nil {
			return 0, pg.err
		}
		body := pg.body
		var err error
		m := gjson.GetManyBytes(body, "metadata.resourceVersion", "metadata.continue", "metadata.remainingItemCount", "items.#")
		if listRV == 0 {
			if listRV, err = change.ParseRV(m[0].Str); err != nil {
				return 0, retry.Terminal(fmt.Errorf("resource %s: %w", res.ID(), err))
			}
		}
		now := s.Clock.Now()
		// An estimate of the whole relist, for progress lines: what earlier pages listed,
		// this page, and what the server says remains (only without selectors).
		total := 0
		if m[2].Exists() || m[1].Str == "" {
			total = p.listed + int(m[3].Int()+m[2].Int())
		}
		cont := m[1].Str
		if cont != "" {
			next = s.fetchPage(ctx, cont)
		}
		var emitErr error
		// A string view of the page, not a copy: each item is copied once, below.
		gjson.Get(unsafe.String(unsafe.SliceData(body), len(body)), "items").ForEach(func(_, item gjson.Result) bool {
			c, err := s.toChange([]byte(item.Raw), now)
			if err != nil {
				emitErr = err
				return false
			}
			if !s.wanted(c.Key.Namespace) {
				return true
			}
			c.Snapshot = true
			c.ListRV = listRV
			p.add(1)
			if err := emit(ctx, change.Event{Type: change.Listed, Change: c, ListTotal: total}); err != nil {
				emitErr = errors.Join(errEmit, err)
				return false
			}
			return true
		})
		if emitErr != nil {
			return 0, emitErr
		}
		if cont == "" {
			break
		}
	}
	if err := emit(ctx, change.Event{Type: change.RelistEnd, RV: listRV}); err != nil {
		return 0, errors.Join(errEmit, err)
	}
	p.done()
	return listRV, nil
}
