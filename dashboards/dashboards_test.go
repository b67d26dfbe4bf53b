package dashboards

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// The dashboards and the families each reads: the service's own, and
// envoyproxy/ratelimit's as -prometheus-addr (the drop-in's USE_PROMETHEUS)
// serves them.
const (
	nativeBoard    = "envoy-rls.json"
	ratelimitBoard = "envoy-ratelimit.json"
)

var boards = []string{nativeBoard, ratelimitBoard}

// board is the part of a Grafana dashboard the test reads.
type board struct {
	UID           string
	Title         string
	SchemaVersion int
	Panels        []panel
	Templating    struct{ List []variable }
}

type panel struct {
	ID         int
	Type       string
	Title      string
	Datasource *datasource
	Targets    []target
	Panels     []panel // a collapsed row's
}

type target struct {
	RefID      string
	Expr       string
	Datasource *datasource
}

type datasource struct{ Type, UID string }

// variable is a template variable: Query is a string, or for a query
// variable an object holding the query.
type variable struct {
	Name, Type string
	Query      json.RawMessage
	Datasource *datasource
	Current    struct{ Value any }
}

// wantDatasource is what every panel and target must read: the
// dashboard's data source variable, so that an import asks for nothing
// and a provisioned copy works as is.
var wantDatasource = datasource{Type: "prometheus", UID: "${datasource}"}

func loadBoard(t *testing.T, name string) board {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var b board
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

// allPanels is every panel of b, those inside collapsed rows included.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// query is one PromQL text of a dashboard, before its variables are
// substituted: a panel's target, or a query variable's label_values.
type query struct {
	where string
	text  string
	// labelValues marks a variable's label_values(selector, label).
	labelValues bool
}

func (b *board) queries(t *testing.T) []query {
	t.Helper()
	var qs []query
	for _, p := range allPanels(b.Panels) {
		for _, tg := range p.Targets {
			qs = append(qs, query{where: fmt.Sprintf("panel %q, target %s", p.Title, tg.RefID), text: tg.Expr})
		}
	}
	for _, v := range b.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: its query: %v", v.Name, err)
		}
		qs = append(qs, query{where: "variable " + v.Name, text: q.Query, labelValues: true})
	}
	return qs
}

// builtins are the variables Grafana itself defines that the dashboards
// use, with a value of the kind Grafana gives them.
var builtins = map[string]string{
	"__rate_interval": "1m",
	"__interval":      "30s",
	"__range":         "1h",
}

// samples are values of the query variables as an operator would pick
// them: several, which Grafana joins into a regular expression.
var samples = map[string]string{
	"instance": "(10.0.0.1:8080|10.0.0.2:8080)",
	"domain":   "(shop|edge)",
	"rule":     "(per-user|path_/a.method)",
	"key1":     "user",
	"key2":     "",
}

// values are the values substituted for b's variables: the samples for
// query variables, the default of a custom one, Grafana's own.
func (b *board) values(t *testing.T) map[string]string {
	t.Helper()
	vals := maps.Clone(builtins)
	for _, v := range b.Templating.List {
		switch v.Type {
		case "query":
			s, ok := samples[v.Name]
			if !ok {
				t.Fatalf("variable %s: no sample value in the test's samples", v.Name)
			}
			vals[v.Name] = s
		case "custom":
			s, ok := v.Current.Value.(string)
			if !ok {
				t.Fatalf("custom variable %s: its current value is %v, want one string", v.Name, v.Current.Value)
			}
			vals[v.Name] = s
		}
	}
	return vals
}

// variableRef is a variable in Grafana's three syntaxes: ${name} (with an
// optional :format), [[name]], $name.
var variableRef = regexp.MustCompile(`\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)`)

// substitute replaces every variable of text by its value; a variable the
// dashboard does not define is an error.
func substitute(text string, vals map[string]string) (string, error) {
	var unknown []string
	out := variableRef.ReplaceAllStringFunc(text, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		v, ok := vals[name]
		if !ok {
			unknown = append(unknown, name)
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("variables the dashboard does not define: %s", strings.Join(unknown, ", "))
	}
	return out, nil
}

var promql = parser.NewParser(parser.Options{})

// labelValues is a query variable's label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// metricNames parses a substituted query with Prometheus's parser and
// returns the metric names it selects. Every selector must name its
// metric: a dashboard's query over any metric could not be checked.
func metricNames(q query, text string) ([]string, error) {
	if q.labelValues {
		m := labelValues.FindStringSubmatch(text)
		if m == nil {
			return nil, fmt.Errorf("%q: want label_values(selector, label)", text)
		}
		matchers, err := promql.ParseMetricSelector(m[1])
		if err != nil {
			return nil, err
		}
		name := selectorName(matchers)
		if name == "" {
			return nil, fmt.Errorf("%q selects no metric by name", m[1])
		}
		return []string{name}, nil
	}
	expr, err := promql.ParseExpr(text)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if name := selectorName(vs.LabelMatchers); name != "" {
				names = append(names, name)
			} else {
				errs = append(errs, vs.String())
			}
		}
		return nil
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("selectors naming no metric: %s", strings.Join(errs, ", "))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%q selects no metric", text)
	}
	return names, nil
}

func selectorName(ms []*labels.Matcher) string {
	for _, m := range ms {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// boardMetrics is every metric name b's queries select, each with the
// first place that selects it, after checking that every query parses.
func boardMetrics(t *testing.T, b *board) map[string]string {
	t.Helper()
	vals := b.values(t)
	names := map[string]string{}
	for _, q := range b.queries(t) {
		text, err := substitute(q.text, vals)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		ns, err := metricNames(q, text)
		if err != nil {
			t.Errorf("%s: %s\n%v", q.where, text, err)
			continue
		}
		for _, n := range ns {
			if _, ok := names[n]; !ok {
				names[n] = q.where
			}
		}
	}
	return names
}

// chosenLabel matches a label whose values an operator chooses: a query
// may match them only against a variable, never a value of its own (one
// route hard-coded, as Envoy Gateway's own dashboard has it).
var chosenLabel = regexp.MustCompile(`\b(instance|domain|rule|key1|key2)\s*(=~|!~|!=|=)\s*"([^"]*)"`)

// Every query parses once its variables are substituted and names the
// metrics it reads, every panel reads the data source variable, and no
// query fixes a domain, rule or key of its own.
func TestDashboardsParse(t *testing.T) {
	for _, name := range boards {
		t.Run(name, func(t *testing.T) {
			b := loadBoard(t, name)
			checkShape(t, &b)
			for _, q := range b.queries(t) {
				for _, m := range chosenLabel.FindAllStringSubmatch(q.text, -1) {
					if !strings.HasPrefix(m[3], "$") {
						t.Errorf("%s: %s matches %q, want a variable", q.where, m[1], m[3])
					}
				}
			}
			if names := boardMetrics(t, &b); len(names) == 0 {
				t.Errorf("no query names a metric")
			}
		})
	}
}

// checkShape checks what an import relies on: a uid, a recent schema,
// the data source variable read by every panel and target, unique panel
// ids.
func checkShape(t *testing.T, b *board) {
	t.Helper()
	if b.UID == "" || b.Title == "" {
		t.Errorf("uid %q, title %q: want both", b.UID, b.Title)
	}
	if b.SchemaVersion < 39 {
		t.Errorf("schemaVersion %d, want 39 or later", b.SchemaVersion)
	}
	if !slices.ContainsFunc(b.Templating.List, func(v variable) bool {
		return v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"`
	}) {
		t.Errorf("no variable datasource of type datasource over prometheus")
	}
	ids := map[int]string{}
	for _, p := range allPanels(b.Panels) {
		if prev, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q: same id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if !slices.Contains(panelTypes, p.Type) {
			t.Errorf("panel %q: type %q, want one of %v (TestDashboardsSchema checks those)", p.Title, p.Type, panelTypes)
		}
		if p.Datasource == nil || *p.Datasource != wantDatasource {
			t.Errorf("panel %q: datasource %v, want %v", p.Title, p.Datasource, wantDatasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no targets", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || *tg.Datasource != wantDatasource || tg.Expr == "" {
				t.Errorf("panel %q, target %s: datasource %v, expr %q; want %v and an expression", p.Title, tg.RefID, tg.Datasource, tg.Expr, wantDatasource)
			}
		}
	}
	for _, v := range b.Templating.List {
		if v.Type == "query" && (v.Datasource == nil || *v.Datasource != wantDatasource) {
			t.Errorf("variable %s: datasource %v, want %v", v.Name, v.Datasource, wantDatasource)
		}
	}
}

// The checks bite: a query that does not parse, one over no named
// metric, a variable no dashboard defines, a label_values of no metric.
func TestChecksCatchMistakes(t *testing.T) {
	vals := maps.Clone(builtins)
	for _, c := range []struct {
		q    query
		want string
	}{
		{query{text: `sum(rate(rls_decisions_total[$__rate_interval])`}, "unclosed left parenthesis"},
		{query{text: `rate(rls_decisions_total{domain=~"(a"}[1m])`}, "missing closing )"},
		{query{text: `count({__name__=~"rls_.+"})`}, "naming no metric"},
		{query{text: `rls_decisions_total{domain=~"$domian"}`}, "does not define: domian"},
		{query{text: `label_values(domain)`, labelValues: true}, "want label_values(selector, label)"},
		{query{text: `label_values({domain="x"}, rule)`, labelValues: true}, "selects no metric by name"},
	} {
		text, err := substitute(c.q.text, vals)
		if err == nil {
			_, err = metricNames(c.q, text)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one saying %q", c.q.text, err, c.want)
		}
	}
}

// panelTypes are the kinds of panel the dashboards use, besides rows:
// those whose options TestDashboardsSchema knows.
var panelTypes = []string{"timeseries", "stat"}

// Each dashboard decodes strictly into the types of Grafana's dashboard
// schema (its foundation SDK's, generated from the schema): no field it
// does not know, none it requires missing, in the dashboard, its
// variables, its panels' options and its Prometheus queries.
func TestDashboardsSchema(t *testing.T) {
	rt := cog.NewRuntime()
	rt.RegisterPanelcfgVariant(timeseries.VariantConfig())
	rt.RegisterPanelcfgVariant(stat.VariantConfig())
	rt.RegisterDataqueryVariant(prometheus.VariantConfig())
	for _, name := range boards {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// The classic schema, which every Grafana imports; v2 is Grafana
		// 12's other format.
		//lint:ignore SA1019 the dashboards are in the classic format
		var d dashboard.Dashboard
		if err := buildErrors(d.UnmarshalJSONStrict(data)); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := buildErrors(d.Validate()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// buildErrors is err, or nil for an empty cog.BuildErrors: the SDK
// returns its list of errors as an error even when the list is empty.
func buildErrors(err error) error {
	var errs cog.BuildErrors
	if errors.As(err, &errs) && len(errs) == 0 {
		return nil
	}
	return err
}
