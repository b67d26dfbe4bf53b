package accuracy

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// HotKeyFile is the name of the hot-key row's tables in docs/: a file of
// its own, out of the byte-identical set (Files), since it needs Redis.
const HotKeyFile = "accuracy-hotkey.md"

// HotKeyTarget is the target for the mode at its limit: at most
// 1 % over the limit in every second, at least 95 % of it used.
const (
	HotKeyMaxOver  = 0.01
	HotKeyMinUsed  = 0.95
	HotKeyInstance = 3
)

// HotKeyReport is the hot-key row's run: the same traces decided exactly
// on Redis (one call a hit) and through HotKeyInstance hot-key layers.
type HotKeyReport struct {
	Exact, Hot *Report
	// Calls is the hot-key fleet's calls to the Redis store.
	Calls int64
}

// RunHotKey replays c on the Redis at url, plainly and in the hot-key
// mode, under keys starting with prefix.
func RunHotKey(ctx context.Context, url, prefix string, c Config) (*HotKeyReport, error) {
	d, closeRedis, err := OpenRedis(url)
	if err != nil {
		return nil, err
	}
	defer closeRedis()
	h, closeHot, err := OpenHotKey(url, HotKeyInstance)
	if err != nil {
		return nil, err
	}
	defer closeHot()
	out := &HotKeyReport{}
	for _, r := range []struct {
		d    Decider
		name string
		to   **Report
	}{{d, "exact:", &out.Exact}, {h, "hot:", &out.Hot}} {
		c.Decider, c.KeyPrefix = r.d, prefix+r.name
		if *r.to, err = Run(ctx, c); err != nil {
			return nil, err
		}
	}
	out.Calls = h.Calls()
	return out, nil
}

// WriteMarkdown writes the hot-key row's tables: per trace, each algorithm
// exact on Redis and in the mode, with the four figures and the whole
// seconds' figures beside the targets.
func (h *HotKeyReport) WriteMarkdown(w io.Writer) error {
	c := h.Hot.Config
	var b strings.Builder
	var requests int64
	for _, row := range h.Hot.Figures {
		for _, f := range row {
			requests += f.Requests
		}
	}
	fmt.Fprintf(&b, "Seed %d, %d sources, %s of traffic each, threshold %d per %s; %d instances, `sync_interval` %s, a source's hits spread over them in turn; one redis-server; the replay's clock. "+
		"Target: at most %.0f %% over the limit in every period, at least %.0f %% of it used. The fleet made %s calls to Redis for %s decisions (%.3f a decision).\n\n",
		c.Seed, c.Sources, c.Duration, c.Requests, c.Period, HotKeyInstance, HotKeySync, 100*HotKeyMaxOver, 100*HotKeyMinUsed,
		thousands(h.Calls), thousands(requests), ratio(h.Calls, requests))
	for i, s := range c.Shapes {
		fmt.Fprintf(&b, "#### `%s`: %s\n\n", s, fmt.Sprintf(shapeTitles[s.Kind], s.Load))
		b.WriteString("| algorithm | requests | allowed | decided differently | mean rate error | false-negative sources (worst overshoot) | false-positive sources | worst period over the limit | least used of a saturated period |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for a, alg := range c.Algorithms {
			for _, r := range []struct {
				name string
				f    Figures
			}{{"exact, Redis", h.Exact.Figures[i][a]}, {"hot-key, " + HotKeySync.String(), h.Hot.Figures[i][a]}} {
				f := r.f
				fmt.Fprintf(&b, "| %s (%s) | %s | %.2f %% | %.4f %% | %s | %s | %d of %d | %+.1f %% | %s |\n", alg, r.name, thousands(f.Requests),
					100*f.AllowedShare(), 100*f.DiffShare(), rateError(alg, f), falseNegatives(f), f.FalsePositive, f.Sources,
					100*f.WorstPeriodOvershoot(), used(f))
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func used(f Figures) string {
	if f.LeastUsedShare() < 0 {
		return "no period offered the limit"
	}
	return fmt.Sprintf("%.1f %%", 100*f.LeastUsedShare())
}
