package leader

import (
	"context"
	"errors"
	"log/slog"
	goruntime "runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// fast timings: a standby takes over 2s after the last renewal.
func opts(id string) Options {
	return Options{Namespace: "kube-system", Name: "kube-cdc", Identity: id,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
}

// newClient is a fake clientset whose Lease updates honour resourceVersion like a real
// apiserver (the fake tracker does not), so two candidates cannot both win a race.
func newClient(t *testing.T) *fake.Clientset {
	c := fake.NewClientset()
	var rv atomic.Int64
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	c.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		l.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		if err := c.Tracker().Create(gvr, l, l.Namespace); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	c.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := c.Tracker().Get(gvr, l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, errors.New("stale resourceVersion"))
		}
		l.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		if err := c.Tracker().Update(gvr, l, l.Namespace); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	return c
}

func holder(t *testing.T, c *fake.Clientset) string {
	t.Helper()
	l, err := c.CoordinationV1().Leases("kube-system").Get(context.Background(), "kube-cdc", metav1.GetOptions{})
	if err != nil {
		return "<" + err.Error() + ">"
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// A candidate that records how many candidates lead at once.
type candidate struct {
	id      string
	cancel  context.CancelFunc
	led     chan struct{} // closed when lead starts
	done    chan error    // Run's result
	stopped chan struct{} // closed when lead returns
}

func start(t *testing.T, c *fake.Clientset, id string, leading *atomic.Int32, overlap *atomic.Bool) *candidate {
	ctx, cancel := context.WithCancel(t.Context())
	cd := &candidate{id: id, cancel: cancel, led: make(chan struct{}), done: make(chan error, 1), stopped: make(chan struct{})}
	go func() {
		cd.done <- Run(ctx, c, opts(id), testLog(t).With("candidate", id), func(ctx context.Context) error {
			if leading.Add(1) > 1 {
				overlap.Store(true)
			}
			close(cd.led)
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond) // a final flush
			leading.Add(-1)
			close(cd.stopped)
			return ctx.Err()
		})
	}()
	return cd
}

func TestOnlyOneLeadsAndTheStandbyTakesOverOnCancel(t *testing.T) {
	c := newClient(t)
	var leading atomic.Int32
	var overlap atomic.Bool
	a := start(t, c, "a", &leading, &overlap)
	b := start(t, c, "b", &leading, &overlap)

	var first, second *candidate
	select {
	case <-a.led:
		first, second = a, b
	case <-b.led:
		first, second = b, a
	case <-time.After(5 * time.Second):
		t.Fatal("nobody became the leader")
	}
	if h := holder(t, c); h != first.id {
		t.Errorf("lease held by %q, want %q", h, first.id)
	}
	// The standby keeps campaigning without leading for a while.
	select {
	case <-second.led:
		t.Fatal("both lead")
	case <-time.After(3 * time.Second):
	}

	cancelled := time.Now()
	first.cancel()
	select {
	case err := <-first.done:
		if err != nil {
			t.Errorf("the cancelled leader's Run returned %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	select {
	case <-first.stopped:
	default:
		t.Error("Run returned before lead did")
	}
	select {
	case <-second.led:
		// The lease is released on cancel, so this is faster than LeaseDuration.
		if d := time.Since(cancelled); d > opts("").LeaseDuration+time.Second {
			t.Errorf("standby took over after %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the standby did not take over")
	}
	if h := holder(t, c); h != second.id {
		t.Errorf("lease held by %q, want %q", h, second.id)
	}
	if overlap.Load() {
		t.Error("two candidates led at once")
	}
	second.cancel()
	if err := <-second.done; err != nil {
		t.Error(err)
	}
	if h := holder(t, c); h != "" {
		t.Errorf("lease still held by %q after the last leader stopped", h)
	}
}

func TestALeaderThatCannotRenewStopsBeforeTheLeaseExpires(t *testing.T) {
	c := newClient(t)
	var partitioned atomic.Bool
	c.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if partitioned.Load() {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	var leadStopped atomic.Int64
	led := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), c, opts("a"), testLog(t), func(ctx context.Context) error {
			close(led)
			<-ctx.Done()
			leadStopped.Store(time.Now().UnixNano())
			return ctx.Err()
		})
	}()
	select {
	case <-led:
	case <-time.After(5 * time.Second):
		t.Fatal("never led")
	}
	l, err := c.CoordinationV1().Leases("kube-system").Get(t.Context(), "kube-cdc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lastRenew := l.Spec.RenewTime.Time
	partitioned.Store(true)

	select {
	case err := <-done:
		if !errors.Is(err, ErrLostLease) {
			t.Errorf("Run returned %v, want ErrLostLease", err)
		}
		t.Logf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the lease was lost")
	}
	// A standby may take over LeaseDuration after the last renewal it saw; the deposed
	// leader must have stopped before that.
	stopped := time.Unix(0, leadStopped.Load())
	if stopped.IsZero() || !stopped.Before(lastRenew.Add(opts("").LeaseDuration)) {
		t.Errorf("lead stopped %v after the last renewal, lease duration %v", stopped.Sub(lastRenew), opts("").LeaseDuration)
	}
}

func TestLeadsErrorIsReturnedAndTheLeaseReleased(t *testing.T) {
	c := newClient(t)
	boom := errors.New("sink: terminal")
	err := Run(t.Context(), c, opts("a"), testLog(t), func(ctx context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("got %v", err)
	}
	if h := holder(t, c); h != "" {
		t.Errorf("lease still held by %q", h)
	}
}

func TestCancelledWhileCampaigningReturnsNil(t *testing.T) {
	c := newClient(t)
	// Someone else holds the lease for a long time.
	id, dur, now := "other", int32(3600), metav1.NewMicroTime(time.Now())
	if _, err := c.CoordinationV1().Leases("kube-system").Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-cdc"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	var called atomic.Bool
	err := Run(ctx, c, opts("a"), testLog(t), func(context.Context) error { called.Store(true); return nil })
	if err != nil || called.Load() {
		t.Errorf("err %v, lead called %v", err, called.Load())
	}
	if h := holder(t, c); h != "other" {
		t.Errorf("holder %q", h)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	c := newClient(t)
	lead := func(context.Context) error { return nil }
	for _, o := range []Options{
		{Name: "x", Identity: "a"},
		{Namespace: "x", Identity: "a"},
		{Namespace: "x", Name: "x"},
		{Namespace: "x", Name: "x", Identity: "a", LeaseDuration: time.Second, RenewDeadline: 2 * time.Second},
	} {
		if err := Run(t.Context(), c, o, nil, lead); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// The watchdog reads its lock's clock: on a fake one, the lead context's end comes when
// the clock, not the wall, puts the last renewal past the renew deadline.
func TestTheWatchdogExpiresWhenItsClockPutsTheLastRenewalPastTheDeadline(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	l := &fencedLock{log: testLog(t), clock: clk}
	l.renewedAt.Store(clk.Now().UnixNano())
	expired := make(chan struct{})
	stop := l.watchdog(t.Context(), 10*time.Second, 2*time.Second, func() { close(expired) })
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog set no ticker on its clock within 30 s")
		}
		goruntime.Gosched()
	}
	clk.Step(10 * time.Second) // at the deadline, not past it
	select {
	case <-expired:
		t.Fatal("the watchdog expired with the last renewal exactly the deadline old")
	default:
	}
	clk.Step(time.Second)
	select {
	case <-expired:
	case <-time.After(30 * time.Second):
		t.Fatal("the watchdog did not expire within 30 s of its clock passing the deadline")
	}
}
