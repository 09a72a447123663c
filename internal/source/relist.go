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

// relist emits RelistBegin, one Listed per object and RelistEnd with the LIST's RV. Pages
// are requested with limit/continue; every page is read at the first page's RV.
func (s *Stream) relist(ctx context.Context, emit func(context.Context, change.Event) error) (change.RV, error) {
	res := s.Target.Resource
	if err := emit(ctx, change.Event{Type: change.RelistBegin}); err != nil {
		return 0, errors.Join(errEmit, err)
	}
	var listRV change.RV
	cont := ""
	for {
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
				return 0, fmt.Errorf("resource %s: list continuation expired: %w", res.ID(), err)
			}
			return 0, classify(res, "list", err)
		}
		m := gjson.GetManyBytes(body, "metadata.resourceVersion", "metadata.continue")
		if listRV == 0 {
			if listRV, err = change.ParseRV(m[0].Str); err != nil {
				return 0, retry.Terminal(fmt.Errorf("resource %s: %w", res.ID(), err))
			}
		}
		now := s.Clock.Now()
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
			if err := emit(ctx, change.Event{Type: change.Listed, Change: c}); err != nil {
				emitErr = errors.Join(errEmit, err)
				return false
			}
			return true
		})
		if emitErr != nil {
			return 0, emitErr
		}
		cont = m[1].Str
		if cont == "" {
			break
		}
	}
	if err := emit(ctx, change.Event{Type: change.RelistEnd, RV: listRV}); err != nil {
		return 0, errors.Join(errEmit, err)
	}
	return listRV, nil
}
