package main

import (
	"context"
	"flag"

	"github.com/go-logr/logr"
)

// Help for the verbosity flags textlogger registers, whose own text speaks of a testing logger.
const (
	verbosityUsage = "Log verbosity: 0 logs updates, errors and status writes; 1 also each skip with its reason; higher levels add controller-runtime's and client-go's debug lines."
	vmoduleUsage   = "Comma-separated pattern=N settings: verbosity N for the Go source files matching pattern (e.g. report=1: each skip and its reason, as -v=1 logs them, without the rest of level 1)."
)

// describeLogFlags replaces the help of textlogger's -v and -vmodule.
func describeLogFlags(fs *flag.FlagSet) {
	if f := fs.Lookup("v"); f != nil {
		f.Usage = verbosityUsage
	}
	if f := fs.Lookup("vmodule"); f != nil {
		f.Usage = vmoduleUsage
	}
}

// leaderLossOnStop is controller-runtime's error when the manager gives the Lease up: it reports
// it even after a stop that released the Lease on purpose (LeaderElectionReleaseOnCancel).
const leaderLossOnStop = "leader election lost"

// quietOnStop returns logger, except that once ctx is done the manager's "leader election lost"
// is logged as the normal end of a shutdown, not as an Error: it is the Lease being released.
func quietOnStop(ctx context.Context, logger logr.Logger) logr.Logger {
	return logr.New(stopSink{LogSink: logger.GetSink(), ctx: ctx})
}

type stopSink struct {
	logr.LogSink
	ctx context.Context
}

func (s stopSink) Error(err error, msg string, kv ...any) {
	if err != nil && err.Error() == leaderLossOnStop && s.ctx.Err() != nil {
		s.LogSink.Info(0, "Released the leader lease on shutdown", kv...)
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s stopSink) WithValues(kv ...any) logr.LogSink {
	return stopSink{LogSink: s.LogSink.WithValues(kv...), ctx: s.ctx}
}

func (s stopSink) WithName(name string) logr.LogSink {
	return stopSink{LogSink: s.LogSink.WithName(name), ctx: s.ctx}
}
