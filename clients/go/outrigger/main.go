package outrigger

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// StopGrace is how long calls in flight may finish after SIGTERM or SIGINT.
const StopGrace = 5 * time.Second

// Main is a plugin host's main: flags (--listen, --framework, --version), tracing from the OTEL_*
// variables, a first line on stdout saying where it listens ("... listening on ADDR ..."), then
// serving until SIGTERM or SIGINT (health NOT_SERVING, calls in flight finish, spans are flushed). It
// returns the process exit code. fs may carry the program's own flags (nil: a new set); plugins is
// called once the flags are parsed.
func Main(what string, fs *flag.FlagSet, args []string, plugins func() ([]Registration, error)) int {
	return MainVersion(what, HostVersion, fs, args, plugins)
}

// MainVersion is Main for a host whose version says more than the SDK's (Options.Version): the
// Handshake sends it, and --version prints it ("<what> <version>") and exits.
func MainVersion(what, version string, fs *flag.FlagSet, args []string, plugins func() ([]Registration, error)) int {
	if fs == nil {
		fs = flag.NewFlagSet(what, flag.ContinueOnError)
	}
	listen := fs.String("listen", "127.0.0.1:50081", "address to serve on (127.0.0.1:0: a free port)")
	framework := fs.String("framework", "", "where the framework serves Handle and CycleState (default: the address its Handshake sends)")
	printVersion := fs.Bool("version", false, "print the host's version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected arguments: %s\n", what, strings.Join(fs.Args(), " "))
		return 2
	}
	if *printVersion {
		fmt.Printf("%s %s\n", what, version)
		return 0
	}
	regs, err := plugins()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	ctx := context.Background()
	shutdownTracing, err := SetupTracing(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	host, err := NewHost(regs, Options{Listen: *listen, Framework: *framework, Version: version})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	addr, err := host.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	names := make([]string, len(regs))
	for i, r := range regs {
		names[i] = r.Name
	}
	tracing := "tracing off"
	if shutdownTracing != nil {
		tracing = "tracing on"
	}
	fmt.Printf("%s listening on %s (plugins: %s; %s)\n", what, addr, strings.Join(names, ", "), tracing)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	host.Shutdown(StopGrace)
	if shutdownTracing != nil {
		flush, cancel := context.WithTimeout(ctx, StopGrace)
		defer cancel()
		if err := shutdownTracing(flush); err != nil {
			fmt.Fprintf(os.Stderr, "%s: flushing spans: %v\n", what, err)
		}
	}
	return 0
}
