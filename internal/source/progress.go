package source

// Relist reasons, for RelistObserver.
const (
	RelistStart      = "start"       // no checkpoint to watch from
	RelistGone       = "gone"        // the watch was answered 410 Gone
	RelistTimeTravel = "time-travel" // the server is behind the stream's resource version
)

// RelistObserver is an Observer that is also told why each relist happens, how it reads
// the collection and how far it has got, for the relist metrics. Probed on Observer.
type RelistObserver interface {
	// RelistStarted is called once per relist attempt, when the LIST or streaming watch
	// is under way; reason is one of the Relist… constants, mode "stream" or "paged".
	RelistStarted(resource, reason, mode string)
	// RelistListed says the relist under way has listed n objects so far (reported
	// every listProgressEvery objects, and at the end).
	RelistListed(resource string, n int)
}

// listProgressEvery spaces RelistListed calls: a metric need not move per object.
const listProgressEvery = 500

// listProgress counts the objects of one relist for the RelistObserver.
type listProgress struct {
	s        *Stream
	listed   int
	reported int
}

func (s *Stream) newListProgress() *listProgress {
	p := &listProgress{s: s}
	p.report()
	return p
}

func (p *listProgress) add(n int) {
	p.listed += n
	if p.listed-p.reported >= listProgressEvery {
		p.report()
	}
}

func (p *listProgress) done() { p.report() }

func (p *listProgress) report() {
	p.reported = p.listed
	if o, ok := p.s.Observer.(RelistObserver); ok {
		o.RelistListed(p.s.Target.Resource.ID(), p.listed)
	}
}

// observeStart tells the RelistObserver that a relist reads the collection in mode.
func (s *Stream) observeStart(mode ListMode) {
	if o, ok := s.Observer.(RelistObserver); ok {
		o.RelistStarted(s.Target.Resource.ID(), s.reason, string(mode))
	}
}
