package runbooks_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// command is one command line of a runbook's shell blocks, comments removed, placeholders kept.
type command struct {
	runbook, text string
}

// shellFence opens a fenced shell block, at any indentation (blocks inside numbered lists).
var shellFence = regexp.MustCompile("^```(sh|bash|shell)\\s*$")

// runbookCommands reads every command line of docs/runbooks/*.md, in file order.
func runbookCommands() ([]command, error) {
	paths, err := filepath.Glob(filepath.Join(manifests.RepoRoot(), "docs", "runbooks", "*.md"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no runbooks in docs/runbooks")
	}
	sort.Strings(paths)
	var out []command
	for _, path := range paths {
		lines, err := shellLines(path)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			out = append(out, command{runbook: strings.TrimSuffix(filepath.Base(path), ".md"), text: l})
		}
	}
	return out, nil
}

// shellLines returns the command lines of path's shell blocks: comment-only lines dropped,
// trailing comments cut, lines ending in a backslash joined with the next.
func shellLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	in, pending := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in:
			in = shellFence.MatchString(line)
		case strings.HasPrefix(line, "```"):
			in = false
		default:
			line = pending + stripComment(line)
			if pending = ""; strings.HasSuffix(line, `\`) {
				pending = strings.TrimSuffix(line, `\`)
			} else if line != "" {
				out = append(out, line)
			}
		}
	}
	if in || pending != "" {
		return nil, fmt.Errorf("%s: a shell block or a continued line is not closed", path)
	}
	return out, sc.Err()
}

// stripComment cuts a # that starts a word outside quotes, and what follows it.
func stripComment(line string) string {
	cut := len(line)
	eachUnquoted(line, func(i int) bool {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			cut = i
			return false
		}
		return true
	})
	return strings.TrimSpace(line[:cut])
}

// stages splits a command line into its pipeline's commands at the pipes outside quotes.
func stages(line string) []string {
	var out []string
	start := 0
	eachUnquoted(line, func(i int) bool {
		if line[i] == '|' {
			out = append(out, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
		return true
	})
	return append(out, strings.TrimSpace(line[start:]))
}

// eachUnquoted calls f with the index of each byte of line outside single or double quotes,
// until f returns false.
func eachUnquoted(line string, f func(int) bool) {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case !f(i):
			return
		}
	}
}

// placeholder is an all-capitals word of two or more letters: NAME, MACHINE.
var placeholder = regexp.MustCompile(`\b[A-Z][A-Z_]*[A-Z]\b`)

// substitute replaces each placeholder of line by its value in values, or fails on one it lacks.
func substitute(line string, values map[string]string) (string, error) {
	var unknown []string
	out := placeholder.ReplaceAllStringFunc(line, func(p string) string {
		v, ok := values[p]
		if !ok {
			unknown = append(unknown, p)
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("placeholder %s has no value: add it to the placeholders table", strings.Join(unknown, ", "))
	}
	return out, nil
}
