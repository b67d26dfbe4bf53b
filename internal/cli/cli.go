// Package cli reads one command's flags the same way for the server and
// every subcommand of envoy-rls: flags anywhere among the arguments, RLS_
// environment twins that the command line overrides, refused values
// reported with what was wanted, and a help that lists every flag with its
// twin and default.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/suggest"
)

// CommandLine is one command's flags, read the same way by the server and
// every subcommand: flags may come before or after the positional
// arguments ("--" ends them), each flag may have an RLS_ environment twin
// that the command line overrides, a refused value is reported with what
// was wanted instead of the flag package's "parse error", and -h asks for
// the help (written by WriteHelp, with each flag's twin and default).
type CommandLine struct {
	FS *flag.FlagSet
	// name and args make the usage line: "envoy-rls lint [-envoy PATH]".
	name, args string
	// about is the help's text between the usage line and the flags.
	about string
	// Env says whether the flags have RLS_ twins; NoEnv names the flags
	// that have none even so.
	Env   bool
	NoEnv map[string]bool
	// EmptyMeansSomething names the flags whose empty value is a setting
	// of its own (RLS_DEBUG_ADDR="" turns pprof off); for the others an
	// empty variable is as good as unset, as container templates often
	// export them.
	EmptyMeansSomething map[string]bool
	// Choices are the string flags that only some strings are, checked
	// when set so that the error names where the value came from (the
	// flag or its twin), as for any other flag type.
	Choices map[string]Choice
	// refused is the first value a flag refused while parsing args: the
	// flag package keeps only the text of a Set error.
	refused error
	// filled are the flags FillEnv set from their twins.
	filled map[string]bool
}

// FromEnv reports whether FillEnv set flag name from its RLS_ twin.
func (c *CommandLine) FromEnv(name string) bool { return c.filled[name] }

// New returns the command line of the command name, whose usage line is
// name and args, and whose help says about.
func New(name, args, about string) *CommandLine {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Parse's errors are returned and printed once by the command, help
	// goes to stdout: the flag package must print neither.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &CommandLine{FS: fs, name: name, args: args, about: about}
}

// Name is the command's name: "envoy-rls lint".
func (c *CommandLine) Name() string { return c.name }

// Usage is the one-line usage of the command.
func (c *CommandLine) Usage() string {
	if c.args == "" {
		return c.name
	}
	return c.name + " " + c.args
}

// ValueKind says what a flag's values look like: a word for its help line
// ("duration"; empty for a boolean, which takes none) and, for the error
// that refuses one, what was wanted ("a duration such as 50ms or 1s"). A
// flag.Value with a method Kind() ValueKind says it itself.
type ValueKind struct {
	Word, Want string
}

// kinded is a flag's value that says what its values look like.
type kinded interface{ Kind() ValueKind }

// Choice is what a string flag of CommandLine.Choices takes: Want says
// it ("json or console"), OK checks a value.
type Choice struct {
	Want string
	OK   func(string) bool
}

// OneOf is "a, b or c".
func OneOf(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// kindOf tells what f's values look like, from the type its value holds.
func (c *CommandLine) kindOf(f *flag.Flag) ValueKind {
	if v, ok := f.Value.(*checkedValue); ok {
		return v.kind
	}
	if k, ok := f.Value.(kinded); ok {
		return k.Kind()
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			return ValueKind{"duration", "a duration such as 50ms or 1s"}
		case bool:
			return ValueKind{"", "true or false"}
		case int, int64, uint, uint64:
			return ValueKind{"int", "a whole number"}
		case float64:
			return ValueKind{"number", "a number"}
		case string:
			if ch, ok := c.Choices[f.Name]; ok {
				return ValueKind{"string", ch.Want}
			}
			return ValueKind{"string", ""}
		}
	}
	return ValueKind{"value", ""}
}

// checkedValue is a flag's value that, when it refuses a string, says what
// it wanted and records the refusal for ParseArgs.
type checkedValue struct {
	flag.Value
	name string
	kind ValueKind
	// choice, when not nil, is the strings the flag takes.
	choice *Choice
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
	if v.choice != nil && !v.choice.OK(s) {
		return errors.New("want " + v.choice.Want)
	}
	if err := v.Value.Set(s); err != nil {
		if v.kind.Want == "" {
			return err // the value's own error is all there is to say
		}
		return errors.New("want " + v.kind.Want)
	}
	return nil
}

// IsBoolFlag keeps -flag without a value meaning true for a boolean.
func (v *checkedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// check wraps every flag's value in a checkedValue, once.
func (c *CommandLine) check() {
	c.FS.VisitAll(func(f *flag.Flag) {
		if _, done := f.Value.(*checkedValue); !done {
			v := &checkedValue{Value: f.Value, name: f.Name, kind: c.kindOf(f), refused: &c.refused}
			if ch, ok := c.Choices[f.Name]; ok {
				v.choice = &ch
			}
			f.Value = v
		}
	})
}

// Check sets flag name to s as its twin in the environment would, without
// recording a refusal: the error says what was wanted, for the caller to
// name where s came from. It reports an unknown flag as such.
func (c *CommandLine) Check(name, s string) error {
	c.check()
	f := c.FS.Lookup(name)
	if f == nil {
		return fmt.Errorf("no flag -%s", name)
	}
	return f.Value.(*checkedValue).set(s)
}

// ParseArgs parses args, flags anywhere among the positional arguments,
// which it returns in order. It returns flag.ErrHelp for -h, -help and
// --help.
func (c *CommandLine) ParseArgs(args []string) ([]string, error) {
	c.check()
	var rest []string
	for {
		if err := c.FS.Parse(args); err != nil {
			if c.refused != nil {
				return nil, c.refused
			}
			return nil, c.unknownFlag(err)
		}
		left := c.FS.Args()
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

// notDefined starts the flag package's error for a flag it does not know.
const notDefined = "flag provided but not defined: -"

// unknownFlag is err, the flag package's, with the flag a typo most likely
// meant when err is about a flag it does not know, as UnknownTwins does
// for the environment: -redis-ulr is -redis-url.
func (c *CommandLine) unknownFlag(err error) error {
	name, ok := strings.CutPrefix(err.Error(), notDefined)
	if !ok {
		return err
	}
	var names []string
	c.FS.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if best := suggest.Nearest(name, names); best != "" {
		return fmt.Errorf("%w, did you mean -%s?", err, best)
	}
	return err
}

// FillEnv sets every flag the command line did not give from its RLS_
// twin, where it has one. An empty variable is as good as unset, except
// for the flags whose empty value means something.
func (c *CommandLine) FillEnv(lookupEnv func(string) (string, bool)) error {
	if !c.Env {
		return nil
	}
	c.check()
	given := map[string]bool{}
	c.FS.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	c.FS.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || c.NoEnv[f.Name] {
			return
		}
		v, ok := lookupEnv(EnvName(f.Name))
		if !ok || v == "" && !c.EmptyMeansSomething[f.Name] {
			return
		}
		if err := f.Value.(*checkedValue).set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", EnvName(f.Name), v, err))
			return
		}
		if c.filled == nil {
			c.filled = map[string]bool{}
		}
		c.filled[f.Name] = true
	})
	return errors.Join(errs...)
}

// Parse is ParseArgs, then FillEnv.
func (c *CommandLine) Parse(args []string, lookupEnv func(string) (string, bool)) ([]string, error) {
	rest, err := c.ParseArgs(args)
	if err != nil {
		return nil, err
	}
	return rest, c.FillEnv(lookupEnv)
}

// UnknownTwins returns, for each RLS_ variable of environ (NAME=VALUE
// entries, as os.Environ gives them) that is no flag's twin, a warning
// naming it, with the twin a typo most likely meant: RLS_REDIS_ULR is
// nothing, and a start that ignored it silently would use no Redis.
func (c *CommandLine) UnknownTwins(environ []string) []string {
	if !c.Env {
		return nil
	}
	var twins []string
	c.FS.VisitAll(func(f *flag.Flag) {
		if !c.NoEnv[f.Name] {
			twins = append(twins, EnvName(f.Name))
		}
	})
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "RLS_") || slices.Contains(twins, name) {
			continue
		}
		warnings = append(warnings, suggest.DidYouMean(name+" is set but is no flag's twin: ignored", name, twins))
	}
	return warnings
}

// EnvName turns a flag name into its environment twin: -redis-url is
// RLS_REDIS_URL.
func EnvName(flagName string) string {
	return "RLS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// TwinSet reports whether flag name's twin is really set in the
// environment: set and not empty, unless its empty value means something.
func (c *CommandLine) TwinSet(name string, lookupEnv func(string) (string, bool)) bool {
	v, ok := lookupEnv(EnvName(name))
	return ok && (v != "" || c.EmptyMeansSomething[name])
}

// Failed reports a parse error the way every command does: help on stdout
// and exit 0 for -h, else the error and the usage line on stderr and exit
// 2 (a usage error).
func (c *CommandLine) Failed(err error, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		c.WriteHelp(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\nusage: %s (-h for help)\n", c.name, err, c.Usage())
	return 2
}

// Flag is one flag as the help shows it.
type Flag struct {
	Name string
	// Word says what its values look like ("duration"); empty for a
	// boolean, which takes none.
	Word string
	// Env is its RLS_ twin; empty when it has none.
	Env     string
	Default string
	Usage   string
}

// Flags are the command's flags, in the help's order (by name).
func (c *CommandLine) Flags() []Flag {
	c.check()
	var flags []Flag
	c.FS.VisitAll(func(f *flag.Flag) {
		fl := Flag{Name: f.Name, Word: c.kindOf(f).Word, Default: f.DefValue, Usage: f.Usage}
		if c.Env && !c.NoEnv[f.Name] {
			fl.Env = EnvName(f.Name)
		}
		flags = append(flags, fl)
	})
	return flags
}

// WriteHelp writes the usage line, the about text and every flag with its
// kind, its RLS_ twin and its default.
func (c *CommandLine) WriteHelp(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n", c.Usage())
	if c.about != "" {
		fmt.Fprintf(w, "\n%s", c.about)
	}
	if c.Env {
		fmt.Fprint(w, "\nflags, each also set by its environment variable (a flag on the command line wins):\n")
	} else {
		fmt.Fprint(w, "\nflags:\n")
	}
	for _, f := range c.Flags() {
		line := "  -" + f.Name
		if f.Word != "" {
			line += " " + f.Word
		}
		var notes []string
		if f.Env != "" {
			notes = append(notes, f.Env)
		}
		if f.Default == "" {
			notes = append(notes, "default empty")
		} else {
			notes = append(notes, "default "+f.Default)
		}
		fmt.Fprintf(w, "%s  (%s)\n", line, strings.Join(notes, ", "))
		for _, l := range Wrap(f.Usage, 72) {
			fmt.Fprintf(w, "        %s\n", l)
		}
	}
}

// Wrap breaks s into lines of at most width bytes, at spaces (a longer
// word gets a line of its own).
func Wrap(s string, width int) []string {
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
