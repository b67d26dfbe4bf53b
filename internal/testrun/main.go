// Command testrun runs one step of `make test` (a `go test` command) and
// tells a person at the terminal what it is doing: a line per package as
// it ends, the output of the tests that failed, and, while packages run
// for long with nothing printed, which ones are still running and for how
// long. Each step adds its packages to a tally file; `testrun -summary`
// ends the run with the elapsed time and one line, "packages: N passed,
// N failed", that a reader (or CI) finds last.
//
// It reads `go test -json`, so go test's own exit status and build
// failures are kept: the step fails when go test fails, whatever was
// parsed.
//
//	testrun -tally FILE -begin
//	testrun -tally FILE [-dir DIR] [-env K=V]... -- go test flags and packages
//	testrun -tally FILE -summary
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type envFlags []string

func (e *envFlags) String() string     { return strings.Join(*e, " ") }
func (e *envFlags) Set(v string) error { *e = append(*e, v); return nil }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tally := fs.String("tally", "", "the file each step adds its packages to (required)")
	dir := fs.String("dir", "", "the directory go test runs in (a nested module)")
	begin := fs.Bool("begin", false, "start the tally afresh, noting the time, before the first step")
	summary := fs.Bool("summary", false, "print the elapsed time and the packages passed and failed of every step, and exit non-zero if any failed")
	quiet := fs.Duration("quiet", 30*time.Second, "how long the output may stay silent before the running packages are listed")
	var env envFlags
	fs.Var(&env, "env", "K=V added to go test's environment (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *tally == "" {
		fmt.Fprintln(stderr, "testrun: -tally is required")
		return 2
	}
	if *begin {
		err := os.WriteFile(*tally, []byte("start "+time.Now().Format(time.RFC3339Nano)+"\n"), 0o644)
		if err != nil {
			fmt.Fprintln(stderr, "testrun:", err)
			return 2
		}
		return 0
	}
	if *summary {
		return printSummary(*tally, stdout, stderr)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "testrun: no go test arguments after --")
		return 2
	}
	return step(*tally, *dir, env, fs.Args(), *quiet, stdout, stderr)
}

// event is one line of `go test -json` (cmd/test2json): the fields read.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// progress is what a step knows of its packages while it runs.
type progress struct {
	mu      sync.Mutex
	out     io.Writer
	started map[string]time.Time
	// output is kept per test (package and test name) and per package
	// (test ""), and printed when that test or package fails: go test's
	// -json runs the tests verbosely, and a passing test's lines are not
	// printed, as go test without -v does not.
	output  map[testID]*strings.Builder
	passed  []string
	failed  []string
	printed time.Time
}

func (p *progress) line(format string, args ...any) {
	fmt.Fprintf(p.out, format+"\n", args...)
	p.printed = time.Now()
}

// testID names a test of a package, or the package itself (Test "").
type testID struct{ pkg, test string }

func (p *progress) handle(e event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := testID{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		fmt.Fprint(p.out, e.Output)
		p.printed = time.Now()
	case "start":
		p.started[e.Package] = time.Now()
	case "output":
		p.buffer(id).WriteString(e.Output)
	case "pass", "skip":
		delete(p.output, id)
		if e.Test == "" {
			delete(p.started, e.Package)
			if e.Action == "pass" {
				p.passed = append(p.passed, e.Package)
				p.line("ok  \t%s\t%.1fs", e.Package, e.Elapsed)
			}
		}
	case "fail":
		b := p.output[id]
		delete(p.output, id)
		if e.Test != "" {
			if b != nil {
				fmt.Fprint(p.out, b.String())
				p.printed = time.Now()
			}
			return
		}
		delete(p.started, e.Package)
		p.failed = append(p.failed, e.Package)
		// go test's own output of a failed package ends with its FAIL
		// line; a package that printed nothing gets one.
		if b != nil && b.Len() > 0 {
			fmt.Fprint(p.out, b.String())
			p.printed = time.Now()
		} else {
			p.line("FAIL\t%s\t%.1fs", e.Package, e.Elapsed)
		}
	}
}

func (p *progress) buffer(id testID) *strings.Builder {
	b := p.output[id]
	if b == nil {
		b = new(strings.Builder)
		p.output[id] = b
	}
	return b
}

// still lists the packages running after quiet of silence.
func (p *progress) still(quiet time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.printed) < quiet || len(p.started) == 0 {
		return
	}
	names := make([]string, 0, len(p.started))
	for pkg, at := range p.started {
		names = append(names, fmt.Sprintf("%s (%s)", pkg, time.Since(at).Round(time.Second)))
	}
	sort.Strings(names)
	p.line("… still running: %s", strings.Join(names, ", "))
}

// remind says which packages are still running, each second that follows
// quiet ones, until done is closed.
func (p *progress) remind(quiet time.Duration, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			p.still(quiet)
		}
	}
}

// follow reads go test -json's events from r until it ends, and passes
// on the go command's own lines as they are.
func (p *progress) follow(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// Not test2json's: the go command's own words.
			p.mu.Lock()
			fmt.Fprintln(p.out, sc.Text())
			p.mu.Unlock()
			continue
		}
		p.handle(e)
	}
}

// step runs go test -json with goArgs in dir, env added, prints its
// progress, adds its packages to the tally, and returns go test's exit
// code (2 when it could not run or the tally could not be written).
func step(tally, dir string, env []string, goArgs []string, quiet time.Duration, stdout, stderr io.Writer) int {
	cmd := exec.Command("go", append([]string{"test", "-json"}, goArgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "testrun:", err)
		return 2
	}
	words := append(append([]string{}, env...), "go", "test")
	if dir != "" {
		words = append([]string{"(in " + dir + ")"}, words...)
	}
	fmt.Fprintln(stdout, strings.Join(append(words, goArgs...), " "))
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testrun:", err)
		return 2
	}
	p := &progress{out: stdout, started: map[string]time.Time{}, output: map[testID]*strings.Builder{}, printed: time.Now()}
	done := make(chan struct{})
	go p.remind(quiet, done)
	p.follow(pipe)
	waitErr := cmd.Wait()
	close(done)
	if err := appendTally(tally, p.passed, p.failed); err != nil {
		fmt.Fprintln(stderr, "testrun:", err)
		return 2
	}
	if waitErr != nil {
		var exit *exec.ExitError
		if errors.As(waitErr, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(stderr, "testrun:", waitErr)
		return 2
	}
	return 0
}

// The tally is one line per package: its result, then its name; its
// first line, "start TIME" (written by -begin), is when the run began.
func appendTally(path string, passed, failed []string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, pkg := range passed {
		fmt.Fprintln(f, "pass", pkg)
	}
	for _, pkg := range failed {
		fmt.Fprintln(f, "fail", pkg)
	}
	return f.Close()
}

func printSummary(path string, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "testrun:", err)
		return 2
	}
	var passed, failed int
	var failures []string
	var start time.Time
	for _, line := range strings.Split(string(data), "\n") {
		result, pkg, _ := strings.Cut(line, " ")
		switch result {
		case "start":
			if t, err := time.Parse(time.RFC3339Nano, pkg); err == nil {
				start = t
			}
		case "pass":
			passed++
		case "fail":
			failed++
			failures = append(failures, pkg)
		}
	}
	if len(failures) > 0 {
		fmt.Fprintln(stdout, "failed:", strings.Join(failures, " "))
	}
	if !start.IsZero() {
		fmt.Fprintln(stdout, "elapsed:", time.Since(start).Round(time.Second))
	}
	fmt.Fprintf(stdout, "packages: %d passed, %d failed\n", passed, failed)
	if failed > 0 || passed == 0 {
		return 1
	}
	return 0
}
