// Package rlog routes hashicorp/raft's hclog output into log/slog, under a
// component name, with its levels shifted down (Raft is chatty at Info)
// and failures to reach a peer logged once per outage (see TrackPeers).
package rlog

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Logger is an hclog.Logger over slog. Raft is chatty at Info, so its
// levels are shifted down: its Info is our Debug, its Debug and Trace are
// below Debug; Warn and Error stay. At the usual Info level only raft's
// warnings and errors appear. Each line carries "logger": the name given
// to New, joined with the names Named adds ("raft.transport").
type Logger struct {
	base *slog.Logger // without name and implied args
	l    *slog.Logger
	name string
	args []any
	// peers, when set, logs failures to reach a peer once per outage
	// (see peerLog); shared by every copy made by With and Named.
	peers *peerLog
}

var _ hclog.Logger = (*Logger)(nil)

// New is a Logger writing to base under name (base usually carries the
// component, "raft" or "catalog").
func New(base *slog.Logger, name string, args ...any) *Logger {
	l := base.With("logger", name)
	if len(args) > 0 {
		l = l.With(args...)
	}
	return &Logger{base: base, l: l, name: name, args: args}
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

func (a *Logger) enabled(l hclog.Level) bool {
	return l != hclog.Off && a.l.Enabled(context.Background(), slogLevel(l))
}

func (a *Logger) Log(level hclog.Level, msg string, args ...any) {
	if a.peers != nil && a.peers.handle(a.l, msg, args) {
		return
	}
	if level == hclog.Warn && startupElection(msg, args) {
		level = hclog.Info // every node's first election, not a problem
	}
	if a.enabled(level) {
		a.l.Log(context.Background(), slogLevel(level), msg, formatted(args)...)
	}
}

// formatted replaces hclog.Fmt values (hashicorp/raft logs its
// configuration so) with the text they format to; slog would show the
// format and its arguments as a list.
func formatted(args []any) []any {
	out := args
	for i, v := range args {
		if f, ok := v.(hclog.Format); ok && len(f) > 0 {
			if &out[0] == &args[0] { // copy once: the slice is the caller's
				out = append([]any(nil), args...)
			}
			if format, ok := f[0].(string); ok {
				out[i] = fmt.Sprintf(format, f[1:]...)
			} else {
				out[i] = fmt.Sprint(f...)
			}
		}
	}
	return out
}

func (a *Logger) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *Logger) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *Logger) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *Logger) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *Logger) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *Logger) IsTrace() bool                 { return a.enabled(hclog.Trace) }
func (a *Logger) IsDebug() bool                 { return a.enabled(hclog.Debug) }
func (a *Logger) IsInfo() bool                  { return a.enabled(hclog.Info) }
func (a *Logger) IsWarn() bool                  { return a.enabled(hclog.Warn) }
func (a *Logger) IsError() bool                 { return a.enabled(hclog.Error) }
func (a *Logger) ImpliedArgs() []any            { return a.args }
func (a *Logger) Name() string                  { return a.name }

func (a *Logger) With(args ...any) hclog.Logger {
	return a.sharing(New(a.base, a.name, append(append([]any(nil), a.args...), args...)...))
}

func (a *Logger) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.sharing(New(a.base, name, a.args...))
}

func (a *Logger) ResetNamed(name string) hclog.Logger {
	return a.sharing(New(a.base, name, a.args...))
}

// TrackPeers makes l (and every Logger made from it by With and Named)
// log failures to reach a peer once per outage, timed by now; feed it
// raft's observations with Observer.
func (a *Logger) TrackPeers(now func() time.Time) *Logger {
	a.peers = newPeerLog(now)
	return a
}

// Observer is the raft observer that tells TrackPeers which peers answered,
// joined or left (nil without TrackPeers); register it with
// raft.RegisterObserver.
func (a *Logger) Observer() *raft.Observer {
	if a.peers == nil {
		return nil
	}
	return a.peers.observer(a.l)
}

// sharing gives c the peer log of a.
func (a *Logger) sharing(c *Logger) *Logger {
	c.peers = a.peers
	return c
}

// SetLevel is a no-op: the slog handler decides what is shown.
func (a *Logger) SetLevel(hclog.Level) {}

func (a *Logger) GetLevel() hclog.Level {
	for l := hclog.Trace; l <= hclog.Error; l++ {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (a *Logger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(a.l.Handler(), slogLevel(hclog.Info))
}

func (a *Logger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
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
