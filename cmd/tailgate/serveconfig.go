package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"gopkg.in/yaml.v3"
)

// This file: serve's configuration file. Its keys are the flags' own
// names, and its values are given to the flags as the command line would
// give them (flag.FlagSet.Set), so that every flag, including one added
// later, can be set in the file without a line of code here, and is
// checked as on the command line. A YAML list stands for a comma-separated
// one (backends). JSON is YAML, so a JSON file works too.

// fileConfig is what a -config file gave beyond its flags' values.
type fileConfig struct {
	// lines is where the file set each flag it set ("path:line", by flag
	// name), for the checks of their values to say (see
	// serveFlags.locate).
	lines map[string]string
	// routes are its routes (the "routes" key: see parseRoutes), and
	// routeLines where each begins, by name.
	routes     []gateway.Route
	routeLines map[string]string
}

// applyConfigFile sets, from the YAML file at path, the flags of fs that
// the command line has not set: flags given on the command line win over
// the file; and reads its routes, which only a file gives. Errors name the
// file and, for a key or value, its line.
func applyConfigFile(fs *flag.FlagSet, path string) (fileConfig, error) {
	fc := fileConfig{lines: map[string]string{}, routeLines: map[string]string{}}
	return fc, applyConfig(fs, path, &fc)
}

func applyConfig(fs *flag.FlagSet, path string, fc *fileConfig) error {
	set := fc.lines
	data, err := os.ReadFile(path)
	if err != nil {
		return err // "open <path>: ...": it names the file
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err) // "yaml: line N: ..."
	}
	if len(doc.Content) == 0 {
		return nil // empty, or only comments: nothing set
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: want a mapping of flag names to values, such as \"backends: [http://127.0.0.1:8081]\"", path, root.Line)
	}
	seen := map[string]int{} // key -> line
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		at := fmt.Sprintf("%s:%d", path, k.Line)
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: a key must be a flag name", at)
		}
		name := k.Value
		if line, dup := seen[name]; dup {
			return fmt.Errorf("%s: %q given twice (first on line %d)", at, name, line)
		}
		seen[name] = k.Line
		if name == "routes" {
			if err := parseRoutes(path, v, fc); err != nil {
				return err
			}
			continue
		}
		if name == "config" || fs.Lookup(name) == nil {
			return fmt.Errorf("%s: unknown key %q%s", at, name, suggest(fs, name))
		}
		value, err := flagValue(v)
		if err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, v.Line, name, err)
		}
		if onCommandLine[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			if isDuration(fs.Lookup(name)) {
				// The flag package says only "parse error"; "5" is the
				// usual slip (a number of seconds, as elsewhere).
				return fmt.Errorf("%s:%d: %s: invalid value %q: want a duration such as 5s or 250ms", path, v.Line, name, value)
			}
			return fmt.Errorf("%s:%d: %s: invalid value %q: %w", path, v.Line, name, value, err)
		}
		set[name] = fmt.Sprintf("%s:%d", path, v.Line)
	}
	return nil
}

// isDuration reports whether fl takes a time.Duration.
func isDuration(fl *flag.Flag) bool {
	g, ok := fl.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, ok = g.Get().(time.Duration)
	return ok
}

// flagValue returns the command-line form of a value: a scalar as
// written, a list of scalars joined by commas.
func flagValue(v *yaml.Node) (string, error) {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", errors.New("no value")
		}
		return v.Value, nil
	case yaml.SequenceNode:
		items := make([]string, 0, len(v.Content))
		for _, it := range v.Content {
			if it.Kind == yaml.AliasNode {
				it = it.Alias
			}
			if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
				return "", fmt.Errorf("line %d: a list item must be a single value", it.Line)
			}
			items = append(items, it.Value)
		}
		return strings.Join(items, ","), nil
	}
	return "", errors.New("want a value or a list of values, not a mapping")
}

// suggest returns " (did you mean <flag>?)" for the flag of fs nearest to
// name, when one is near enough to be a misspelling of it, else "".
func suggest(fs *flag.FlagSet, name string) string {
	best, dist := "", 3 // at most two edits away
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" {
			return
		}
		if d := editDistance(name, f.Name); d < dist {
			best, dist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
