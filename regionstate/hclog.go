package regionstate

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter routes hashicorp/raft's hclog output into slog. Raft is
// chatty at Info, so its levels are shifted down: its Info is our Debug,
// its Debug and Trace are below Debug; Warn and Error stay. At the usual
// Info level only raft's warnings and errors appear.
type hclogAdapter struct {
	base *slog.Logger // without name and implied args
	l    *slog.Logger
	name string
	args []any
	// peers, when set, logs failures to reach a peer once per outage
	// (see peerLog); shared by every copy made by With and Named.
	peers *peerLog
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLog(base *slog.Logger, name string, args ...any) *hclogAdapter {
	l := base.With("logger", name)
	if len(args) > 0 {
		l = l.With(args...)
	}
	return &hclogAdapter{base: base, l: l, name: name, args: args}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 8
	case hclog.Debug:
		return slog.LevelDebug - 4
	case hclog.Info:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	return l != hclog.Off && a.l.Enabled(context.Background(), slogLevel(l))
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if a.peers != nil && a.peers.handle(a.l, msg, args) {
		return
	}
	if level == hclog.Warn && startupElection(msg, args) {
		level = hclog.Info // every node's first election, not a problem
	}
	if a.enabled(level) {
		a.l.Log(context.Background(), slogLevel(level), msg, args...)
	}
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hclogAdapter) IsTrace() bool                 { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool                 { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool                  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool                  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool                 { return a.enabled(hclog.Error) }
func (a *hclogAdapter) ImpliedArgs() []any            { return a.args }
func (a *hclogAdapter) Name() string                  { return a.name }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return a.sharing(newHCLog(a.base, a.name, append(append([]any(nil), a.args...), args...)...))
}

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.sharing(newHCLog(a.base, name, a.args...))
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return a.sharing(newHCLog(a.base, name, a.args...))
}

// sharing gives c the peer log of a.
func (a *hclogAdapter) sharing(c *hclogAdapter) *hclogAdapter {
	c.peers = a.peers
	return c
}

// SetLevel is a no-op: the slog handler decides what is shown.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	for l := hclog.Trace; l <= hclog.Error; l++ {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (a *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(a.l.Handler(), slogLevel(hclog.Info))
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}

// startupElection reports hashicorp/raft's "heartbeat timeout reached" when
// no leader was ever known: the election every node holds when it starts.
func startupElection(msg string, args []any) bool {
	if msg != "heartbeat timeout reached, starting election" {
		return false
	}
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "last-leader-id" {
			return fmt.Sprint(args[i+1]) == "" // a raft.ServerID, not a string
		}
	}
	return false
}
