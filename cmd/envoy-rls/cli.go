package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// commandLine is one command's flags, read the same way by the server and
// every subcommand: flags may come before or after the positional
// arguments ("--" ends them), each flag may have an RLS_ environment twin
// that the command line overrides, a refused value is reported with what
// was wanted instead of the flag package's "parse error", and -h asks for
// the help (written by writeHelp, with each flag's twin and default).
type commandLine struct {
	fs *flag.FlagSet
	// name and args make the usage line: "envoy-rls lint [-envoy PATH]".
	name, args string
	// about is the help's text between the usage line and the flags.
	about string
	// env says whether the flags have RLS_ twins; noEnv names the flags
	// that have none even so.
	env   bool
	noEnv map[string]bool
	// refused is the first value a flag refused while parsing args: the
	// flag package keeps only the text of a Set error.
	refused error
}

func newCommandLine(name, args, about string) *commandLine {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Parse's errors are returned and printed once by the command, help
	// goes to stdout: the flag package must print neither.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &commandLine{fs: fs, name: name, args: args, about: about}
}

// usage is the one-line usage of the command.
func (c *commandLine) usage() string {
	if c.args == "" {
		return c.name
	}
	return c.name + " " + c.args
}

// valueKind says what a flag's values look like: a word for its help line
// ("duration"; empty for a boolean, which takes none) and, for the error
// that refuses one, what was wanted ("a duration such as 50ms or 1s").
type valueKind struct {
	word, want string
}

// stringChoices are the string flags that only some strings are, checked
// when set so that the error names where the value came from (the flag or
// its twin), as for any other flag type.
var stringChoices = map[string]struct {
	want string
	ok   func(string) bool
}{
	"log-format": {oneOf([]string{"json", "console"}), func(s string) bool { return s == "json" || s == "console" }},
	"log-level": {oneOf([]string{"debug", "info", "warn", "error"}), func(s string) bool {
		_, err := zapcore.ParseLevel(s)
		return err == nil
	}},
}

// oneOf is "a, b or c".
func oneOf(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// kindOf tells what f's values look like, from the type its value holds.
func kindOf(f *flag.Flag) valueKind {
	if v, ok := f.Value.(*checkedValue); ok {
		return v.kind
	}
	if k, ok := f.Value.(interface{ kind() valueKind }); ok {
		return k.kind()
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			return valueKind{"duration", "a duration such as 50ms or 1s"}
		case bool:
			return valueKind{"", "true or false"}
		case int, int64, uint, uint64:
			return valueKind{"int", "a whole number"}
		case float64:
			return valueKind{"number", "a number"}
		case string:
			if c, ok := stringChoices[f.Name]; ok {
				return valueKind{"string", c.want}
			}
			return valueKind{"string", ""}
		}
	}
	return valueKind{"value", ""}
}

// checkedValue is a flag's value that, when it refuses a string, says what
// it wanted and records the refusal for parseArgs.
type checkedValue struct {
	flag.Value
	name string
	kind valueKind
	// refused is the command line's, set on the first refusal.
	refused *error
}

func (v *checkedValue) Set(s string) error {
	err := v.set(s)
	if err != nil && *v.refused == nil {
		*v.refused = fmt.Errorf("-%s %q: %w", v.name, s, err)
	}
	return err
}

// set is Set without the recording, for the environment, whose errors
// name the variable instead.
func (v *checkedValue) set(s string) error {
	if c, ok := stringChoices[v.name]; ok && !c.ok(s) {
		return errors.New("want " + c.want)
	}
	if err := v.Value.Set(s); err != nil {
		if v.kind.want == "" {
			return err // the value's own error is all there is to say
		}
		return errors.New("want " + v.kind.want)
	}
	return nil
}

// IsBoolFlag keeps -flag without a value meaning true for a boolean.
func (v *checkedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// check wraps every flag's value in a checkedValue, once.
func (c *commandLine) check() {
	c.fs.VisitAll(func(f *flag.Flag) {
		if _, done := f.Value.(*checkedValue); !done {
			f.Value = &checkedValue{Value: f.Value, name: f.Name, kind: kindOf(f), refused: &c.refused}
		}
	})
}

// parseArgs parses args, flags anywhere among the positional arguments,
// which it returns in order. It returns flag.ErrHelp for -h, -help and
// --help.
func (c *commandLine) parseArgs(args []string) ([]string, error) {
	c.check()
	var rest []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if c.refused != nil {
				return nil, c.refused
			}
			return nil, err
		}
		left := c.fs.Args()
		if n := len(args) - len(left); n > 0 && args[n-1] == "--" {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// fillEnv sets every flag the command line did not give from its RLS_
// twin, where it has one. An empty variable is as good as unset, except
// for the flags whose empty value means something.
func (c *commandLine) fillEnv(lookupEnv func(string) (string, bool)) error {
	if !c.env {
		return nil
	}
	c.check()
	given := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	c.fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || c.noEnv[f.Name] {
			return
		}
		v, ok := lookupEnv(envName(f.Name))
		if !ok || v == "" && !emptyMeansSomething[f.Name] {
			return
		}
		if err := f.Value.(*checkedValue).set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", envName(f.Name), v, err))
		}
	})
	return errors.Join(errs...)
}

// parse is parseArgs, then fillEnv.
func (c *commandLine) parse(args []string, lookupEnv func(string) (string, bool)) ([]string, error) {
	rest, err := c.parseArgs(args)
	if err != nil {
		return nil, err
	}
	return rest, c.fillEnv(lookupEnv)
}

// failed reports a parse error the way every command does: help on stdout
// and exit 0 for -h, else the error and the usage line on stderr and exit
// 2 (a usage error).
func (c *commandLine) failed(err error, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		c.writeHelp(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\nusage: %s (-h for help)\n", c.name, err, c.usage())
	return 2
}

// writeHelp writes the usage line, the about text and every flag with its
// kind, its RLS_ twin and its default.
func (c *commandLine) writeHelp(w io.Writer) {
	c.check()
	fmt.Fprintf(w, "usage: %s\n", c.usage())
	if c.about != "" {
		fmt.Fprintf(w, "\n%s", c.about)
	}
	if c.env {
		fmt.Fprint(w, "\nflags, each also set by its environment variable (a flag on the command line wins):\n")
	} else {
		fmt.Fprint(w, "\nflags:\n")
	}
	c.fs.VisitAll(func(f *flag.Flag) {
		line := "  -" + f.Name
		if k := kindOf(f).word; k != "" {
			line += " " + k
		}
		var notes []string
		if c.env && !c.noEnv[f.Name] {
			notes = append(notes, envName(f.Name))
		}
		if f.DefValue == "" {
			notes = append(notes, "default empty")
		} else {
			notes = append(notes, "default "+f.DefValue)
		}
		fmt.Fprintf(w, "%s  (%s)\n", line, strings.Join(notes, ", "))
		for _, l := range wrap(f.Usage, 72) {
			fmt.Fprintf(w, "        %s\n", l)
		}
	})
}

// wrap breaks s into lines of at most width bytes, at spaces (a longer
// word gets a line of its own).
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
