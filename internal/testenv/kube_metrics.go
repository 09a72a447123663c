package testenv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// RequestCount sums the apiserver_request_total counters with this verb (as the apiserver
// spells it: LIST, WATCH, GET, CREATE, ...; compared case-insensitively) and resource
// (plural, e.g. "configmaps") since the apiserver (re)started. Take it before and after
// the code under test and compare, e.g. to prove that no LIST was issued. A request is
// counted when it ends: an open WATCH is not counted yet, and a streaming list
// (sendInitialEvents) counts as a WATCH, not a LIST. Counts restart from zero with the
// apiserver.
func (k *Kube) RequestCount(ctx context.Context, verb, resource string) (float64, error) {
	body, err := k.clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("get /metrics: %w", err)
	}
	return sumCounter(string(body), "apiserver_request_total", func(labels map[string]string) bool {
		return strings.EqualFold(labels["verb"], verb) && labels["resource"] == resource
	})
}

// sumCounter sums the samples of metric in a Prometheus text exposition whose labels
// match.
func sumCounter(text, metric string, match func(map[string]string) bool) (float64, error) {
	var sum float64
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, rest, err := parseLabels(rest)
		if err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, fmt.Errorf("parse %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		if match(labels) {
			sum += v
		}
	}
	return sum, nil
}

// parseLabels reads `name="value",...}` and returns the labels and what follows the '}'.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, ", ")
		if rest, ok := strings.CutPrefix(s, "}"); ok {
			return labels, rest, nil
		}
		name, rest, ok := strings.Cut(s, "=\"")
		if !ok {
			return nil, "", errors.New("malformed label")
		}
		var value strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					value.WriteByte('\n')
				default:
					value.WriteByte(rest[i])
				}
				continue
			}
			value.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, "", errors.New("unterminated label value")
		}
		labels[name] = value.String()
		s = rest[i+1:]
	}
}
