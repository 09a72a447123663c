// Command testprogress reads `go test -json` on stdin and prints a short progress log:
// a line when each package starts and when it ends (with its time), the whole output of
// every failed test and package, and a summary. It exits 1 when anything failed, so
// `go test -json … | testprogress` can stand for `go test …` in make and CI.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

func main() {
	start := time.Now()
	out := map[string]*strings.Builder{} // package + "\x00" + test → output
	var failed []string
	passed := 0
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		line := in.Bytes()
		var ev event
		if json.Unmarshal(line, &ev) != nil || (ev.Action == "" && ev.ImportPath == "") {
			fmt.Println(string(line)) // not test2json: pass it through
			continue
		}
		pkg := ev.Package
		if pkg == "" {
			pkg = ev.ImportPath
		}
		key := pkg + "\x00" + ev.Test
		switch ev.Action {
		case "start":
			fmt.Printf("%s  ▶ %s\n", clock(start), pkg)
		case "output", "build-output":
			b := out[key]
			if b == nil {
				b = &strings.Builder{}
				out[key] = b
			}
			b.WriteString(ev.Output)
		case "pass", "skip":
			if ev.Test == "" && ev.Action == "pass" {
				passed++
				fmt.Printf("%s  ok   %s (%.1fs)\n", clock(start), pkg, ev.Elapsed)
			}
			if ev.Test == "" && ev.Action == "skip" {
				fmt.Printf("%s  --   %s (no tests)\n", clock(start), pkg)
			}
			if ev.Test == "" {
				for k := range out {
					if strings.HasPrefix(k, pkg+"\x00") {
						delete(out, k)
					}
				}
			} else {
				delete(out, key)
			}
		case "fail", "build-fail":
			if ev.Test != "" {
				fmt.Printf("--- FAIL: %s %s (%.1fs)\n", pkg, ev.Test, ev.Elapsed)
				if b := out[key]; b != nil {
					fmt.Print(b.String())
				}
				delete(out, key)
				continue
			}
			failed = append(failed, pkg)
			fmt.Printf("%s  FAIL %s (%.1fs)\n", clock(start), pkg, ev.Elapsed)
			var keys []string
			for k := range out {
				if strings.HasPrefix(k, pkg+"\x00") {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys { // package-level output: panics, timeouts, build errors
				fmt.Print(out[k].String())
				delete(out, k)
			}
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(1)
	}
	fmt.Printf("%s  %d packages passed, %d failed\n", clock(start), passed, len(failed))
	if len(failed) > 0 {
		fmt.Println("FAIL:", strings.Join(failed, " "))
		os.Exit(1)
	}
}

func clock(start time.Time) string {
	d := time.Since(start).Round(time.Second)
	return fmt.Sprintf("[%02d:%02d]", int(d.Minutes()), int(d.Seconds())%60)
}
