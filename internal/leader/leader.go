package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ErrLostLease is wrapped by the error Run returns when this replica stopped being the
// leader while ctx was still alive. The process should exit: it restarts as a standby.
var ErrLostLease = errors.New("lost the lease")

// errLeadReturned is the lead context's cause when lead returned on its own.
var errLeadReturned = errors.New("lead returned")

// Options names the Lease and times the election. config.LeaderElection fills them.
type Options struct {
	Namespace string // of the Lease, required
	Name      string // of the Lease, required
	Identity  string // this replica, unique among candidates (the pod name); required
	// LeaseDuration is how long a standby waits without a renewal before taking over.
	// Default 15s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps failing to renew before it stops
	// leading. Must be less than LeaseDuration. Default 10s.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between attempts to acquire or renew. Default 2s.
	RetryPeriod time.Duration
	// Clock times the renew deadline's watchdog (when the last renewal started, and how
	// old it is); default the real clock. Tests pass a fake one
	// (k8s.io/utils/clock/testing). client-go's elector keeps its own real clock.
	Clock clock.WithTicker
}

// Options' defaults.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

func (o Options) withDefaults() (Options, error) {
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	switch {
	case o.Namespace == "":
		return o, errors.New("leader: the Lease namespace is required")
	case o.Name == "":
		return o, errors.New("leader: the Lease name is required")
	case o.Identity == "":
		return o, errors.New("leader: an identity is required")
	}
	return o, nil
}

// Run campaigns for the Lease opts.Namespace/opts.Name and, while it holds it, runs lead.
// It blocks until one of:
//   - ctx ends: nil (after lead has returned and the lease is released). An error lead
//     returns other than the context's is returned.
//   - lead returns: its error (nil included); the lease is released.
//   - the lease is lost: an error wrapping ErrLostLease, after lead has returned.
//
// lead's context is cancelled when ctx ends or when leadership is in doubt (see the
// package documentation on fencing). Run calls lead at most once.
func Run(ctx context.Context, client kubernetes.Interface, opts Options, log *slog.Logger, lead func(ctx context.Context) error) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("lease", opts.Namespace+"/"+opts.Name, "identity", opts.Identity)
	lock := &fencedLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.Name},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
		},
		log:   log,
		clock: opts.Clock,
	}

	// The elector runs on its own context so that, when ctx ends while we lead, lead
	// finishes (flushes, commits) before the elector stops renewing and releases the lease.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	leadCtx, cancelLead := context.WithCancelCause(ctx)
	defer cancelLead(nil)
	leadDone := make(chan error, 1)

	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            opts.Name,
		LeaseDuration:   opts.LeaseDuration,
		RenewDeadline:   opts.RenewDeadline,
		RetryPeriod:     opts.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				log.Info("became the leader")
				// lctx ends when client-go stops renewing; the watchdog ends lead sooner,
				// once the last renewal is RenewDeadline old.
				stopAfter := context.AfterFunc(lctx, func() { cancelLead(ErrLostLease) })
				stopWatchdog := lock.watchdog(leadCtx, opts.RenewDeadline, opts.RetryPeriod, func() {
					log.Error("lease not renewed within the renew deadline; stopping", "renewDeadline", opts.RenewDeadline)
					cancelLead(ErrLostLease)
				})
				err := lead(leadCtx)
				stopAfter()
				stopWatchdog()
				cancelLead(errLeadReturned) // a no-op if leadership ended first: the cause stays
				leadDone <- err
				stopElector() // lead is done: stop renewing and release the lease
			},
			// Called when Run ends, whether or not we led. After a clean end the lead
			// context is already cancelled and keeps its cause.
			OnStoppedLeading: func() { cancelLead(ErrLostLease) },
		},
	})
	if err != nil {
		return fmt.Errorf("leader: %w", err)
	}

	// Stop campaigning when ctx ends, unless we lead: then lead sees ctx end through
	// leadCtx and stops the elector itself once it has returned.
	go func() {
		select {
		case <-ctx.Done():
			if !lock.acquired.Load() {
				stopElector()
			}
		case <-electorCtx.Done():
		}
	}()

	log.Info("campaigning for the lease")
	le.Run(electorCtx)

	// client-go starts OnStartedLeading in a goroutine that may not have run yet, but a
	// successful acquire (seen by the lock) always starts it: wait for lead to return so
	// that nothing writes after Run has returned.
	if !lock.acquired.Load() {
		return nil
	}
	err = <-leadDone
	if errors.Is(context.Cause(leadCtx), ErrLostLease) && ctx.Err() == nil {
		log.Error("lost the lease; exiting to restart as a standby")
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("leader: %w %s/%s (lead: %v)", ErrLostLease, opts.Namespace, opts.Name, err)
		}
		return fmt.Errorf("leader: %w %s/%s", ErrLostLease, opts.Namespace, opts.Name)
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	log.Info("stopped leading", "err", err)
	return err
}

// fencedLock is the LeaseLock with two observations added: whether this candidate ever
// acquired the lease, and when its latest successful renewal started, for the watchdog.
type fencedLock struct {
	resourcelock.Interface
	log   *slog.Logger
	clock clock.WithTicker // Options.Clock

	acquired  atomic.Bool
	renewedAt atomic.Int64 // unix nanoseconds at the start of the last successful write

	mu      sync.Mutex
	lastErr string // last logged lock error, so a persistent one is logged once
}

func (l *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	start := l.clock.Now()
	err := l.Interface.Create(ctx, r)
	l.observe(start, r, err)
	return err
}

func (l *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	start := l.clock.Now()
	err := l.Interface.Update(ctx, r)
	l.observe(start, r, err)
	return err
}

func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		l.report(err)
	}
	return r, raw, err
}

// observe records a write of our own identity. The start time is used, not the end: a
// standby measures the lease from when it sees the renewal, which is no earlier.
func (l *fencedLock) observe(start time.Time, r resourcelock.LeaderElectionRecord, err error) {
	if err != nil {
		if !apierrors.IsConflict(err) {
			l.report(err)
		}
		return
	}
	l.report(nil)
	if r.HolderIdentity == l.Identity() { // a release writes an empty holder
		l.renewedAt.Store(start.UnixNano())
		l.acquired.Store(true)
	}
}

// report logs lock errors once per distinct message, so RBAC errors on the Lease (which
// client-go only sends to klog) show in our log without repeating every retry period.
func (l *fencedLock) report(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if msg == l.lastErr {
		return
	}
	l.lastErr = msg
	if err != nil {
		l.log.Warn("lease request failed", "err", err)
	}
}

// watchdog calls expired once the last renewal is older than deadline, checking every
// period/4. The returned func stops it.
func (l *fencedLock) watchdog(ctx context.Context, deadline, period time.Duration, expired func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := l.clock.NewTicker(max(period/4, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				if l.clock.Since(time.Unix(0, l.renewedAt.Load())) > deadline {
					expired()
					return
				}
			}
		}
	}()
	return cancel
}
