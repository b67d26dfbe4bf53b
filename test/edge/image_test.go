package edge

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dockerGoBuild is the build stage's `go build` command: the environment
// the RUN sets before it, and its arguments, split as the shell would
// (double quotes only, which is all the Dockerfile uses).
func dockerGoBuild(t *testing.T) (env, args []string) {
	t.Helper()
	var run string
	for _, in := range dockerStages(t, dockerfilePath)[0] {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			run = in.args
		}
	}
	if run == "" {
		t.Fatalf("%s: no RUN go build in the build stage", dockerfilePath)
	}
	var words []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range run {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	i := slices.Index(words, "go")
	if i < 0 || i+1 >= len(words) || words[i+1] != "build" {
		t.Fatalf("%s: cannot read the go build command of %q", dockerfilePath, run)
	}
	return words[:i], words[i+2:]
}

// TestCrossCompileARM64 builds the binary for linux/arm64 as the
// Dockerfile's build stage does under buildx for that platform (its
// environment, with TARGETOS and TARGETARCH given, and its flags), on this
// machine's architecture, and checks that the result is a static arm64
// executable: what the arm64 image runs without emulation having built it.
func TestCrossCompileARM64(t *testing.T) {
	buildArgs := map[string]string{"TARGETOS": "linux", "TARGETARCH": "arm64", "VERSION": "", "REVISION": ""}
	expand := func(s string) string {
		return os.Expand(s, func(k string) string { return buildArgs[k] })
	}
	envWords, args := dockerGoBuild(t)
	out := filepath.Join(t.TempDir(), "envoy-rls")
	var env []string
	for _, e := range envWords {
		env = append(env, expand(e))
	}
	for i := range args {
		args[i] = expand(args[i])
		if i > 0 && args[i-1] == "-o" {
			args[i] = out
		}
	}
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s go build %s: %v\n%s", strings.Join(env, " "), strings.Join(args, " "), err, b)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 || f.Type != elf.ET_EXEC {
		t.Errorf("built %v %v %v, want a 64-bit arm64 executable (EM_AARCH64, ET_EXEC)", f.Class, f.Machine, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader (PT_INTERP): distroless static has none")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v: distroless static has no libc", libs)
	}
}
