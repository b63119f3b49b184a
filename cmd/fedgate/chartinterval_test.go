package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/gateway/console"
	"github.com/fedgate/fedgate/node"
)

// --console-chart-interval reaches the node's config; a negative or
// sub-10ms interval is refused naming the flag.
func TestServerConsoleChartInterval(t *testing.T) {
	parse := func(args ...string) (node.Config, error) {
		cmd := newServerCmd()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		d, err := cmd.Flags().GetDuration("console-chart-interval")
		if err != nil {
			t.Fatal(err)
		}
		f := serverFlags{listen: "127.0.0.1:0", dataDir: t.TempDir(), nodeID: "n1", writeBackCopies: 2, egressRetention: "0", chartInterval: d}
		return f.nodeConfig(slog.New(slog.DiscardHandler))
	}
	if cfg, err := parse(); err != nil || cfg.ChartInterval != console.DefaultChartInterval {
		t.Errorf("default: %s, %v; want %s", cfg.ChartInterval, err, console.DefaultChartInterval)
	}
	if cfg, err := parse("--console-chart-interval", "250ms"); err != nil || cfg.ChartInterval != 250*time.Millisecond {
		t.Errorf("250ms: %s, %v", cfg.ChartInterval, err)
	}
	for _, bad := range []string{"-1s", "1ms"} {
		if _, err := parse("--console-chart-interval", bad); err == nil || !strings.Contains(err.Error(), "--console-chart-interval") {
			t.Errorf("%s: error %v, want one naming --console-chart-interval", bad, err)
		}
	}
}
