package ui

import (
	"html/template"
	"time"
)

// funcs are the templates' helpers. None returns template.HTML: every value is escaped.
var funcs = template.FuncMap{
	"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
	"resid": resourceID,
}
