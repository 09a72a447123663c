package ui

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/kube-cdc/kube-cdc/internal/status"
)

type statusPage struct {
	page
	Report *status.Report
	Table  string // as `kube-cdc status` prints it
	JSON   string // as `kube-cdc status -o json` prints it
}

func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	if s.o.Status == nil {
		http.NotFound(w, r)
		return
	}
	p, err := s.frame(r, "Status")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	rep, err := s.o.Status(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	sp := statusPage{page: p, Report: rep}
	var b bytes.Buffer
	if err := status.Write(&b, rep, "table", s.o.Now()); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	sp.Table = b.String()
	j, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	sp.JSON = string(j)
	sp.finish()
	s.render(w, "status", sp)
}
