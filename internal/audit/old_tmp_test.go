package audit

import (
	"errors"
	"fmt"
	"github.com/tidwall/gjson"
	"io"
)

func oldDecodeList(r io.Reader) ([]Event, Counts, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, Counts{}, fmt.Errorf("read the audit EventList: %w", err)
	}
	if !gjson.ValidBytes(body) {
		return nil, Counts{}, errors.New("decode the audit EventList: not valid JSON")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, Counts{}, errors.New("decode the audit EventList: not a JSON object")
	}
	if k := root.Get("kind"); k.Exists() && k.String() != "EventList" {
		return nil, Counts{}, fmt.Errorf("decode the audit EventList: kind %q, want EventList", k.String())
	}
	items := root.Get("items")
	if items.Exists() && !items.IsArray() && items.Type != gjson.Null {
		return nil, Counts{}, errors.New("decode the audit EventList: items is not an array")
	}
	var c Counts
	var out []Event
	var ferr error
	items.ForEach(func(_, it gjson.Result) bool {
		e, why, err := extractJSON(it)
		if err != nil {
			ferr = err
			return false
		}
		if c.count(why) {
			out = append(out, e)
		}
		return true
	})
	if ferr != nil {
		return nil, Counts{}, fmt.Errorf("decode the audit EventList: %w", ferr)
	}
	return out, c, nil
}
