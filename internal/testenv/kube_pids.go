package testenv

// Process ids of the servers, for benchmarks that read each one's CPU time
// (/proc/PID/stat) over a window and say how the machine was shared.

// EtcdPID is the process id of the running etcd; 0 when none runs.
func (k *Kube) EtcdPID() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.etcd.pid()
}

// ComponentPID is the process id of a cluster component: "kube-controller-manager",
// "kube-scheduler" or "kwok"; 0 for another name or when it does not run.
func (c *Cluster) ComponentPID(name string) int {
	switch name {
	case "kube-controller-manager":
		return c.cm.pid()
	case "kube-scheduler":
		return c.scheduler.pid()
	case "kwok":
		return c.kwok.pid()
	}
	return 0
}

// PID is the process id of the postmaster of a private server (its backends are its
// children); 0 for an external server or when it does not run.
func (p *Postgres) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
	}
	return p.cmd.Process.Pid
}

func (p *kubeProc) pid() int {
	if p == nil || p.cmd.Process == nil || p.exitErr() != nil {
		return 0
	}
	return p.cmd.Process.Pid
}
