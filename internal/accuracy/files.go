package accuracy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Files are the names WriteFiles gives the report's files, docs/ keeping
// them under these names.
var Files = struct{ Tables, Edge, Load, Overshoot string }{
	Tables:    "accuracy-tables.md",
	Edge:      "accuracy-edge.svg",
	Load:      "accuracy-load.svg",
	Overshoot: "accuracy-overshoot.svg",
}

// WriteFiles writes the report's tables and charts into dir, which must
// exist. The files depend only on the run's Config: the same seed gives
// the same bytes.
func (r *Report) WriteFiles(dir string) error {
	files := []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{Files.Tables, func(b *bytes.Buffer) error { return r.WriteMarkdown(b) }},
		{Files.Edge, func(b *bytes.Buffer) error { return r.EdgeChart(b) }},
		{Files.Load, func(b *bytes.Buffer) error {
			return r.LoadChart(b, "Requests decided differently from an exact sliding log", "decided differently (%)", Figures.DiffShare)
		}},
		{Files.Overshoot, func(b *bytes.Buffer) error {
			return r.LoadChart(b, "Worst overshoot of any source in a trailing period", "admitted above the threshold (% of it)", Figures.WorstOvershoot)
		}},
	}
	for _, f := range files {
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
