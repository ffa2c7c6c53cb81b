// Command tailgate is the one binary of Tailgate: the read gateway (serve),
// the demo, the lab's experiments and fixtures, and the fan-out arithmetic.
//
// Usage:
//
//	tailgate <command> [flags]
//
// Run "tailgate help" for the list of commands and "tailgate <command> -h"
// for each command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // the command line was wrong
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"serve", "run the read gateway: a hedging reverse proxy for GET and HEAD", runServe},
	{"demo", "run a short hedging demonstration on loopback replicas", runDemo},
	{"lab", "run an experiment: compare | straggler | sweep | overload | fanout | bigtable | tied | probation | skew", runLab},
	{"fixture", "run a controlled replica on a loopback address", runFixture},
	{"calc", "fan-out arithmetic: how a server's tail becomes the user's median", runCalc},
	{"version", "print the version, VCS revision and Go version of this binary", runVersion},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[0] == "help" && args[1] != "help" {
			// "tailgate help serve" is "tailgate serve -h"; further words
			// go along, so that "help lab compare" reaches compare's.
			return runCommand(ctx, append(args[1:], "-h"), stdout, stderr)
		}
		usage(stdout)
		return exitOK
	case "-version", "--version":
		return runVersion(ctx, args[1:], stdout, stderr)
	}
	return runCommand(ctx, args, stdout, stderr)
}

// runCommand runs the command args[0] names with the rest of args.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "tailgate: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Tailgate tames tail latency in replicated and fanned-out reads.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: tailgate <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "tailgate <command> -h" for a command's flags.`)
}

// newFlags returns a flag set that reports errors instead of exiting, with
// a usage text headed by the command's synopsis.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tailgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate %s [flags]\n\n%s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and maps the outcome to an exit code: -1 to go on,
// exitOK after -h (usage goes to stdout, so it can be paged), exitUsage
// after a bad flag or a stray argument (reported on stderr, with one line
// pointing to -h: the whole usage, which the flag package would print,
// runs to dozens of lines and scrolls the error out of sight).
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) int {
	usage := fs.Usage
	help := func() int {
		fs.SetOutput(stdout)
		usage()
		return exitOK
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			return help()
		}
	}
	fs.Usage = func() {} // the flag package calls it after each error: see hint
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp): // -h=true and the like
		return help()
	case err != nil:
		if m := badDuration.FindStringSubmatch(err.Error()); m != nil && fs.Lookup(m[1]) != nil && isDuration(fs.Lookup(m[1])) {
			// The flag package says only "parse error".
			fmt.Fprintf(fs.Output(), "-%s takes a duration such as 5s or 250ms\n", m[1])
		}
		hint(fs)
		return exitUsage
	case fs.NArg() > 0:
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		hint(fs)
		return exitUsage
	}
	return -1
}

// badDuration matches the flag package's error for a value that does not
// parse, naming the flag.
var badDuration = regexp.MustCompile(`for flag -([a-z0-9-]+): parse error`)

// hint points from an error on the command line to the usage.
func hint(fs *flag.FlagSet) {
	fmt.Fprintf(fs.Output(), "Run \"%s -h\" for usage.\n", fs.Name())
}

// usageError prints a flag-value error, a line for each problem it holds
// (see serveFlags.config), and returns exitUsage.
func usageError(stderr io.Writer, name string, err error) int {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(stderr, "tailgate %s: %s\n", name, line)
	}
	return exitUsage
}
