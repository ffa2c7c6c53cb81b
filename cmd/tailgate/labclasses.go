package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tailgate-dev/tailgate/lab/exp"
	"github.com/tailgate-dev/tailgate/lab/exp/classes"
)

func runLabClasses(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lab classes", `Two fixtures on 127.0.0.1 serving two kinds of read: GET /item (1ms; each
replica its own 5% of ids at 40ms) and GET /search (20ms; each replica its own
4% of ids at 200ms), -search-share of the reads searches, open loop. The same
reads go to one replica directly, through a per-endpoint p90 hedger (the
experiment's own reference), and through the gateway with one class for
both, with a class per kind (its default), and with a route per kind and a
fixed delay each. One JSON line per condition and kind; the HTML report
plots each kind's latency.`, stderr)
	var o outputs
	o.register(fs)
	d := classes.Defaults()
	reads := fs.Int("reads", d.Reads, fmt.Sprintf("reads per condition (1 to %d)", classes.MaxReads))
	rate := fs.Float64("rate", d.Rate, "offered load, reads per second (open loop; > 0)")
	share := fs.Float64("search-share", d.SearchShare, "share of the reads that are searches, in [0, 1]")
	itemDelay := fs.Duration("item-delay", d.ItemDelay, "the routes condition's fixed delay of /item")
	searchDelay := fs.Duration("search-delay", d.SearchDelay, "the routes condition's fixed delay of /search")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	cfg := classes.Config{Reads: *reads, Rate: *rate, SearchShare: *share, ItemDelay: *itemDelay, SearchDelay: *searchDelay,
		Seed: o.seed, Progress: progress(stderr, "classes")}
	return o.run(ctx, "classes", stdout, stderr, cfg.Validate, func(ctx context.Context) (exp.Report, any, []any, error) {
		rep, err := classes.Run(ctx, cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		return rep, rep.Config, rep.Lines(), nil
	})
}
